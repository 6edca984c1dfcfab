"""Gradient matching (issue 5, item 4): recovers the input without a defense, the encryption under InstaHide."""

import pytest
import torch

from reconguard import errors
from reconguard.attacks.gradients import GradientMatching, model_gradients
from reconguard.data import load_digits
from reconguard.encoders import InstaHide
from reconguard.metrics import ssim
from reconguard.nn import mnist_cnn, seeded


@pytest.fixture(scope="module")
def setup():
    ds = load_digits()
    with seeded(0):
        model = mnist_cnn((1, 8, 8))
    return ds, model


def test_recovers_a_single_image_from_its_gradient(setup):
    ds, model = setup
    x, y = ds.images[3:4], ds.labels[3:4]
    r = GradientMatching(model, steps=30).run(model_gradients(model, x, y), (1, 8, 8), label=y)
    assert float(ssim(r.reconstruction.clamp(0, 1), x)) >= 0.8  # measured 0.99999
    unknown = GradientMatching(model, steps=30).run(model_gradients(model, x, y), (1, 8, 8), num_classes=10)
    assert int(unknown.label.argmax()) == int(y) and float(ssim(unknown.reconstruction.clamp(0, 1), x)) >= 0.8


def test_under_instahide_it_recovers_the_encryption_not_the_image(setup):
    ds, model = setup
    enc = InstaHide(4).encrypt(ds.images[:20], ds.labels[:20], seed=0)
    xe, ye = enc.images[:1], enc.labels[:1]
    r = GradientMatching(model, steps=30).run(model_gradients(model, xe, ye), (1, 8, 8), label=ye)
    assert float(((r.reconstruction - xe) ** 2).mean()) < 1e-4          # the encryption, recovered
    assert float(ssim(r.reconstruction.clamp(0, 1), ds.images[:1])) < 0.5  # not the private image


def test_bad_input(setup):
    _, model = setup
    with pytest.raises(errors.ShapeError):
        GradientMatching(model).run([torch.zeros(3)], (1, 8, 8), label=torch.tensor([0]))
    with pytest.raises(errors.UnknownOptionError):
        GradientMatching(model, optimizer="sgd")
