"""Gradient matching ("Deep leakage from gradients", Zhu et al.; InstaHide paper appendix E,
Algorithm 3): recover a model's input from the gradient it produced.

    x̂, ŷ = argmin_{x', y'}  D(∇_θ L(f_θ(x'), y'),  ∇_θ L(f_θ(x), y))  (+ α·TV(x'))

D is the L2 distance or 1 − cosine similarity summed over the parameter tensors; the label is taken
as known (``label=``) or learned as soft logits; Adam or L-BFGS; x' starts from uniform noise.
Under InstaHide the gradient is of the *encryption*, so that is what the attack can recover.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ...checks import check_positive_int
from ...errors import ShapeError, UnknownOptionError
from ..base import Attack
from ...results import Result


def model_gradients(model: nn.Module, x: torch.Tensor, y: torch.Tensor, create_graph: bool = False) -> list:
    """∇_θ of the cross-entropy (hard or soft labels) of ``model`` on ``(x, y)``."""
    logits = model(x)
    if y.ndim == 2:
        loss = -(y * torch.log_softmax(logits, 1)).sum(1).mean()
    else:
        loss = nn.functional.cross_entropy(logits, y)
    params = [p for p in model.parameters() if p.requires_grad]
    return list(torch.autograd.grad(loss, params, create_graph=create_graph))


def _distance(a: list, b: list, kind: str) -> torch.Tensor:
    if kind == "l2":
        return sum(((g - h) ** 2).sum() for g, h in zip(a, b))
    if kind == "cosine":
        dot = sum((g * h).sum() for g, h in zip(a, b))
        na = torch.sqrt(sum((g * g).sum() for g in a))
        nb = torch.sqrt(sum((h * h).sum() for h in b))
        return 1 - dot / (na * nb + 1e-12)
    raise UnknownOptionError(f"distance must be 'l2' or 'cosine', got {kind!r}.")


def _tv(x: torch.Tensor) -> torch.Tensor:
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


@dataclass(frozen=True)
class GradientMatchingResult(Result):
    reconstruction: torch.Tensor
    label: torch.Tensor
    final_distance: float
    history: list = field(default_factory=list)
    _skip_in_dict = ("reconstruction", "label")


class GradientMatching(Attack):
    """``GradientMatching(model).run(target_grads, input_shape, label=None)``."""

    name = "gradient-matching"

    def __init__(self, model: nn.Module, *, distance: str = "l2", optimizer: str = "lbfgs", steps: int = 200,
                 lr: float = 0.5, tv: float = 0.0, clamp: tuple[float, float] | None = None, seed: int = 0):
        super().__init__(model)
        if optimizer not in ("adam", "lbfgs"):
            raise UnknownOptionError(f"optimizer must be 'adam' or 'lbfgs', got {optimizer!r}.")
        _distance([torch.zeros(1)], [torch.ones(1)], distance)  # validates the name
        self.model, self.distance, self.optimizer = model, distance, optimizer
        self.steps, self.lr, self.tv, self.clamp, self.seed = check_positive_int(steps, "steps"), lr, tv, clamp, seed

    def run(self, target_grads: list, input_shape: tuple, label: torch.Tensor | None = None,
            num_classes: int | None = None, n: int = 1) -> GradientMatchingResult:
        params = [p for p in self.model.parameters() if p.requires_grad]
        if len(target_grads) != len(params) or any(g.shape != p.shape for g, p in zip(target_grads, params)):
            raise ShapeError("target_grads must match the model's trainable parameters (as model_gradients returns).")
        g = torch.Generator().manual_seed(self.seed)
        dev = params[0].device
        x = torch.rand((n, *input_shape), generator=g).to(dev).requires_grad_(True)
        variables = [x]
        if label is None:
            if num_classes is None:
                raise ShapeError("give label= (known) or num_classes= (learned as soft logits).")
            y_logits = torch.randn(n, num_classes, generator=g).to(dev).requires_grad_(True)
            variables.append(y_logits)
        target = [t.detach() for t in target_grads]
        was = self.model.training
        self.model.eval()
        history = []

        def objective():
            y = torch.softmax(y_logits, 1) if label is None else label
            d = _distance(model_gradients(self.model, x, y, create_graph=True), target, self.distance)
            return d + (self.tv * _tv(x) if self.tv else 0.0)

        if self.optimizer == "lbfgs":
            opt = torch.optim.LBFGS(variables, lr=self.lr, max_iter=20, history_size=100, line_search_fn="strong_wolfe")

            def closure():
                opt.zero_grad()
                loss = objective()
                loss.backward()
                return loss

            for _ in range(self.steps):
                history.append(float(opt.step(closure).detach()))
                if self.clamp is not None:
                    with torch.no_grad():
                        x.clamp_(*self.clamp)
        else:
            opt = torch.optim.Adam(variables, lr=self.lr)
            for _ in range(self.steps):
                opt.zero_grad()
                loss = objective()
                loss.backward()
                opt.step()
                history.append(float(loss))
                if self.clamp is not None:
                    with torch.no_grad():
                        x.clamp_(*self.clamp)
        self.model.train(was)
        y = torch.softmax(y_logits, 1).detach() if label is None else label
        return GradientMatchingResult(x.detach(), y, history[-1], history)
