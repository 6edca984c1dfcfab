"""Split ResNet-18 (torchvision names, splits, weights from a local file) and the training loop."""

import pytest
import torch
from torch import nn

from reconguard import errors
from reconguard.bounds import estimate_fisher
from reconguard.data import load_digits
from reconguard.encoders import SplitCNN, SplitResNet18, load_encoder, save_encoder
from reconguard.nn import ResNet18
from reconguard.train import fit

TORCHVISION_KEYS = ["conv1.weight", "bn1.running_var", "layer1.0.conv1.weight", "layer1.1.bn2.bias",
                    "layer2.0.downsample.0.weight", "layer2.0.downsample.1.running_mean", "layer4.1.conv2.weight",
                    "fc.weight", "fc.bias"]


def test_resnet_uses_torchvision_parameter_names():
    model = ResNet18(stem="imagenet")
    keys = set(model.state_dict())
    assert set(TORCHVISION_KEYS) <= keys
    # torchvision's resnet18: 62 parameter tensors, 122 state-dict entries (with BatchNorm buffers)
    assert len(list(model.parameters())) == 62 and len(keys) == 122


@pytest.mark.parametrize("split,shape", [("early", (64, 32, 32)), ("middle", (128, 16, 16)), ("late", (256, 8, 8))])
def test_split_points(split, shape):
    enc = SplitResNet18(split, 48)
    assert enc._feature_shape == shape
    e = enc(torch.rand(2, 3, 32, 32))
    assert e.shape == (2, 48)
    assert enc.downstream()(e).shape == (2, 10)


def test_weights_from_a_local_torchvision_file(tmp_path):
    src = ResNet18(num_classes=1000, stem="imagenet")
    with torch.no_grad():
        for p in src.parameters():
            p.normal_()
    path = tmp_path / "resnet18.pth"
    torch.save(src.state_dict(), path)
    enc = SplitResNet18("middle", 32, (3, 32, 32), weights=path, stem="imagenet")
    assert torch.equal(enc.blocks[0].conv1.weight, src.conv1.weight)
    assert torch.equal(enc.blocks[4].conv2.weight, src.layer2[1].conv2.weight)
    assert enc.weights == str(path)
    with pytest.raises(errors.CorruptDataError, match="stem='imagenet'"):  # 7×7 conv1 into the CIFAR stem
        SplitResNet18("middle", 32, weights=path)
    with pytest.raises(errors.DataFileNotFoundError, match="nope.pth"):
        SplitResNet18("middle", 32, weights=tmp_path / "nope.pth")


def test_fisher_of_resnet_split_matches_loop_with_batchnorm_in_eval():
    enc = SplitResNet18("early", 8, (3, 8, 8), seed=0)
    enc.train()
    with torch.no_grad():
        enc.blocks[0].bn1.running_mean.uniform_(-0.5, 0.5)
        enc.blocks[0].bn1.running_var.uniform_(0.5, 2.0)
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    a = estimate_fisher(enc, x, k=3)
    b = estimate_fisher(enc, x, k=3, method="loop")
    assert enc.training
    assert float((a.matrix - b.matrix).norm() / b.matrix.norm()) < 1e-6


def test_fit_learns_digits_and_resumes_to_the_same_weights(tmp_path):
    ds = load_digits()
    train, val = ds.subset(torch.arange(0, 1400)), ds.subset(torch.arange(1400, 1797))

    def model():
        enc = SplitCNN("early", 16, (1, 8, 8), seed=0)
        return nn.Sequential(enc, enc.downstream())

    straight = model()
    res = fit(straight, train, val, epochs=4, progress=False)
    assert res.best_val_acc > 0.4 and len(res.history) == 4
    ckpt = tmp_path / "ckpt.pt"
    first = model()
    fit(first, train, val, epochs=2, checkpoint=ckpt, progress=False)  # a run "killed" after 2 epochs
    resumed = model()
    res2 = fit(resumed, train, val, epochs=4, checkpoint=ckpt, progress=False)
    assert res2.resumed_from == 2 and res2.best_epoch == res.best_epoch
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_encoder_file_roundtrip(tmp_path):
    enc = SplitCNN("middle", 12, (1, 8, 8), seed=3)
    path = save_encoder(enc, tmp_path / "e.pt")
    back = load_encoder(path)
    x = torch.rand(4, 1, 8, 8)
    assert torch.equal(back(x), enc.eval()(x))
    with pytest.raises(errors.DataFileNotFoundError, match="train-encoder"):
        load_encoder(tmp_path / "missing.pt")
