"""Issue 17, item 1: every attack in ``reconguard.attacks`` is used the same way — built from its target and
settings, ``run(observation) -> Result`` (and ``attack(observation)`` the same call), on one small base."""

import importlib
import inspect
import json
import pkgutil

import pytest
import torch
from torch import nn

import reconguard.attacks
from reconguard.attacks.base import Attack
from reconguard.results import Result


def _all_attacks() -> dict:
    found = {}
    for info in pkgutil.walk_packages(reconguard.attacks.__path__, "reconguard.attacks."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                if issubclass(obj, Attack) and obj is not Attack:
                    found[name] = obj
                elif obj is not Attack and hasattr(obj, "run") and not issubclass(obj, nn.Module) \
                        and not name.startswith("_"):
                    found[name] = None  # a public class with run() that is not an Attack: the test fails on it
    return found


def _images(n=24, size=8, seed=0):
    return torch.rand(n, 1, size, size, generator=torch.Generator().manual_seed(seed))


def _classifier():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 3))


def _linear():
    from reconguard.encoders import random_linear
    return random_linear(64, 16, seed=0)


def _generator():
    from reconguard.attacks.inversion import VAEGenerator
    torch.manual_seed(0)
    return VAEGenerator((1, 8, 8), latent_dim=4)


def _scheme(k=4, **kw):
    from reconguard.encoders import InstaHide
    return InstaHide(k=k, **kw)


def _build(name):
    """(attack, observation args): the smallest case of each attack."""
    from reconguard.attacks import adversarial, gradients, inversion, instahide, reconstruction
    x = _images()
    if name == "MMSEAttack":
        enc = _linear()
        return reconstruction.MMSEAttack(enc, 0.5, 0.2, sigma=0.0), (enc(x.reshape(24, -1)),)
    if name == "MapAttack":
        enc = _linear()
        return reconstruction.MapAttack(enc, None, beta=0.0, steps=3), (enc(x.reshape(24, -1)),)
    if name == "DecoderAttack":
        enc = _linear()
        enc.in_shape = (1, 8, 8)
        a = reconstruction.DecoderAttack(enc, (1, 8, 8), epochs=1, width=8)
        a.fit(x)
        return a, (enc(x.reshape(24, -1)),)
    if name == "GenerativeInversion":
        return inversion.GenerativeInversion(_classifier(), _generator(), candidates=8, keep=2, steps=1, finals=1,
                                             n_transforms=1), ()
    if name == "GradientInversion":
        return inversion.GradientInversion(_classifier(), (1, 8, 8), steps=2, per_class=1), ()
    if name == "PGD":
        return adversarial.PGD(_classifier(), steps=2), (x, torch.zeros(24, dtype=torch.long))
    if name == "GradientMatching":
        model = _classifier()
        y = torch.tensor([1])
        grads = gradients.model_gradients(model, x[:1], torch.nn.functional.one_hot(y, 3).float())
        return gradients.GradientMatching(model, optimizer="adam", steps=2), (grads, (1, 8, 8), y)
    if name == "CarliniAttack":
        from reconguard.data import load_digits
        d = load_digits(size=8)
        enc = _scheme(normalize="symmetric").encrypt(d.images[:8], d.labels[:8], seed=0)
        encs = [_scheme(normalize="symmetric").encrypt(d.images[:8], d.labels[:8], seed=s) for s in range(6)]
        e = torch.cat([c.images for c in encs])
        y = torch.cat([c.labels for c in encs])
        del enc
        return instahide.CarliniAttack(4, 8, restarts=1, max_iter=2), (e, y, d.images[100:200])
    if name == "PublicSearchAttack":
        return instahide.PublicSearchAttack("cosine"), (x[:4], _images(10, 8, 1), 2, None, _scheme().channel_stats(x))
    if name == "Demasker":
        a = instahide.Demasker(1, epochs=1, width=4, depth=1)
        a.fit(x)
        return a, (x[:4],)
    if name == "PublicUncoverAttack":
        return instahide.PublicUncoverAttack(_images(30, 8, 2), 2, rank=5), (x[:4].reshape(4, -1),)
    if name == "PairAttack":
        return instahide.PairAttack(), (x.reshape(24, -1),)
    if name == "AveragingAttack":
        return instahide.AveragingAttack(strong=False, m=2), (x, None, 2)
    if name == "SimilarityNetwork":
        a = instahide.SimilarityNetwork(1, width=4, steps=1, group_n=6, group_T=2, groups=1)
        a.fit(_scheme(k=2), x)
        return a, (x[:6],)
    raise KeyError(name)


ATTACKS = _all_attacks()


def test_every_public_class_with_run_is_an_attack():
    not_attacks = sorted(n for n, c in ATTACKS.items() if c is None)
    assert not not_attacks, f"classes with run() that do not derive from Attack: {not_attacks}"
    assert len(ATTACKS) >= 14


def test_the_registry_lists_every_attack_once_with_what_it_observes():
    """Built from ``attacks.registry.ATTACKS``: the attacks found by walking the package are exactly the registered
    ones, each with an observation type of ``reconguard.observations``."""
    import reconguard.observations as observations
    from reconguard.attacks.registry import ATTACKS as REGISTRY

    classes = [e.cls for e in REGISTRY.values()]
    assert len(classes) == len(set(classes))
    assert {c.__name__ for c in classes} == {n for n, c in ATTACKS.items() if c is not None}
    for name, e in REGISTRY.items():
        assert getattr(observations, e.observes.__name__) is e.observes, name


@pytest.mark.parametrize("registered", sorted(__import__("reconguard.attacks.registry", fromlist=["ATTACKS"]).ATTACKS))
def test_attack_runs_the_same_way(registered):
    from reconguard.attacks.registry import ATTACKS as REGISTRY

    cls = REGISTRY[registered].cls
    name = cls.__name__
    assert cls.name != Attack.name, f"{name} has no name"
    doc = inspect.getdoc(cls) or ""
    assert len(doc) > 40, f"{name} has no docstring"
    ret = inspect.signature(cls.run).return_annotation
    assert ret is not inspect.Signature.empty, f"{name}.run has no return annotation"
    attack, observation = _build(name)
    torch.manual_seed(0)
    result = attack(*observation)
    assert isinstance(result, Result), f"{name}() returned {type(result).__name__}"
    json.dumps(result.to_dict())  # every result is JSON
    target = attack.target
    if isinstance(target, nn.Module):  # mode and requires_grad are restored
        assert all(p.requires_grad for p in target.parameters())
