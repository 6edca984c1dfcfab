"""Trap-MID — trapdoor-based defense (Liu & Chen 2024; AT-AT paper appendix A.1).

Each class c has a trigger image t_c; a trapdoor input is the blend ``(1 − α) x + α t_{y′}`` with y′ a
random class. Per batch:

1. triggers: a discriminator D (a small CNN) learns to tell clean from triggered images
   (BCE), then each trigger takes a signed-gradient step (size ``trigger_step``, clipped to [0, 1]) on
   ``BCE(D(x_trap), clean) + CE(f(x_trap), y′)`` — natural-looking triggers the model reads easily;
2. model: ``(1 − β) · CE(f(x), y) + β · CE(f(x_trap), y′)``.

A model inversion attack then finds the trapdoor shortcut rather than the private data.
Hyper-parameters: (α, β) = (0.007, 0.5) for high resolution ("Trap-MID"), (0.02, 0.2) for low ("Trap-MID*").
The triggers, D and its optimiser are checkpointed (``state_dict``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import check_scalar
from .base import Defense


def blend(x: torch.Tensor, key: torch.Tensor, alpha: float) -> torch.Tensor:
    return alpha * key + (1 - alpha) * x


def _discriminator(channels: int) -> nn.Module:
    return nn.Sequential(nn.Conv2d(channels, 16, 3, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 3, 2, 1),
                         nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(32, 1))


class TrapMID(Defense):
    options = {"alpha": "Trap-MID: trigger blend α", "beta": "Trap-MID: trapdoor loss weight β"}
    def __init__(self, alpha: float = 0.02, beta: float = 0.2, trigger_step: float = 0.01, lr_d: float = 1e-3,
                 num_classes: int | None = None, seed: int = 0):
        self.alpha = check_scalar(alpha, "alpha (trigger blend)", low=0.0, high=1.0)
        self.beta = check_scalar(beta, "beta (trapdoor loss weight)", low=0.0, high=1.0)
        self.trigger_step = check_scalar(trigger_step, "trigger_step", low=0.0)
        self.lr_d, self.num_classes, self.seed = lr_d, num_classes, seed
        self.triggers: torch.Tensor | None = None
        self.discriminator: nn.Module | None = None
        self.opt_d = None

    def _setup(self, x: torch.Tensor, num_classes: int) -> None:
        g = torch.Generator().manual_seed(self.seed)
        self.triggers = torch.rand((num_classes,) + tuple(x.shape[1:]), generator=g).to(x.device, x.dtype)
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            self.discriminator = _discriminator(x.shape[1]).to(x.device, x.dtype)
        self.opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=self.lr_d, betas=(0.5, 0.999))

    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, dict]:
        x, y = batch[0], batch[1]
        n = x.shape[0]
        if self.triggers is None:
            with torch.no_grad():
                c = self.num_classes or int(model(x[:1]).shape[1])
            self._setup(x, c)
        y_trap = torch.randint(0, self.triggers.shape[0], (n,)).to(x.device)
        bce = nn.functional.binary_cross_entropy_with_logits
        # 1. discriminator step, then a signed step on the triggers (the model frozen in eval mode)
        was_training = model.training
        model.eval()
        keys = self.triggers[y_trap].clone().requires_grad_(True)
        x_trap = blend(x, keys, self.alpha)
        d_logits = self.discriminator(torch.cat([x, x_trap.detach()]))
        d_loss = bce(d_logits, torch.cat([torch.ones(n, 1), torch.zeros(n, 1)]).to(x))
        self.opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        self.opt_d.step()
        trig_loss = bce(self.discriminator(x_trap), torch.ones(n, 1).to(x)) + nn.functional.cross_entropy(model(x_trap), y_trap)
        (grad,) = torch.autograd.grad(trig_loss, keys)
        with torch.no_grad():
            total = torch.zeros_like(self.triggers).index_add_(0, y_trap, grad)
            self.triggers = (self.triggers - self.trigger_step * total.sign()).clamp(0, 1)
        model.train(was_training)
        # 2. the model's loss on clean and trapdoor inputs
        x_trap = blend(x, self.triggers[y_trap], self.alpha)
        logits = model(torch.cat([x, x_trap]))
        clean, trap = logits[:n], logits[n:]
        loss = (1 - self.beta) * nn.functional.cross_entropy(clean, y) + self.beta * nn.functional.cross_entropy(trap, y_trap)
        return loss, {"correct": float((clean.argmax(1) == y).float().sum()),
                      "trap_hit": float((trap.argmax(1) == y_trap).float().sum())}

    def state_dict(self) -> dict | None:
        if self.triggers is None:
            return None
        return {"triggers": self.triggers, "discriminator": self.discriminator.state_dict(), "opt_d": self.opt_d.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        t = state["triggers"]
        self._setup(t[:1], t.shape[0])
        self.triggers = t.clone()
        self.discriminator.load_state_dict(state["discriminator"])
        self.opt_d.load_state_dict(state["opt_d"])
