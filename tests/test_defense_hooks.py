"""Issue 33: ``Defense`` declares its hooks — a misspelled override fails when the class is created, ``fit`` asks
only for declared hooks — and InstaHide's training is a ``Defense`` in the registry."""

import pytest
import torch

from reconguard.defenses.base import Defense
from reconguard.train import HOOKS, defense_hook


@pytest.mark.parametrize("name", ["on_epcoh", "prepre", "wrap_modle", "finsh", "deploi"])
def test_a_misspelled_hook_fails_at_class_creation(name):
    with pytest.raises(TypeError, match="did you mean"):
        type("Typo", (Defense,), {name: lambda self, *a: None})


def test_declared_hooks_and_own_helpers_are_accepted():
    cls = type("Fine", (Defense,), {"on_epoch": lambda self, train, epoch: None,
                                    "adversarial_labels": lambda self, y: y, "_private": lambda self: None})
    assert defense_hook(cls(), "on_epoch") is not None and defense_hook(cls(), "loss") is None
    with pytest.raises(KeyError, match="not a declared defense hook"):
        defense_hook(cls(), "on_epcoh")
    assert {"prepare", "loss", "on_epoch", "on_val", "state_dict"} <= HOOKS


def test_instahide_training_is_a_registered_defense():
    from reconguard.defenses.registry import make_defense
    from reconguard.encoders import InstaHide

    d = make_defense("instahide-training", {"k": 2})
    assert isinstance(d, Defense) and isinstance(d.scheme, InstaHide) and d.scheme.k == 2
    x = torch.rand(12, 1, 8, 8)
    y = torch.arange(12) % 3
    mixed = d.on_epoch(torch.utils.data.TensorDataset(x, y), 0)
    assert mixed.tensors[0].shape == x.shape and torch.allclose(mixed.tensors[1].sum(1), torch.ones(12))
    deployed = d.deploy(torch.nn.Flatten())
    assert torch.allclose(deployed(x[:2]), ((x[:2] - x.mean()) / x.std()).flatten(1), atol=0.05)
