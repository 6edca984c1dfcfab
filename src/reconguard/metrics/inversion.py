"""How much a model-inversion attack recovered (AT-AT paper section 2, appendix I.3).

* AttAcc@1 / @k — the evaluation classifier's top-k accuracy on the reconstructions, with Wilson 95 %
  intervals (with few classes, @5 is trivially 1: report it only when there are more than 5 classes);
* EvalConf — the evaluation classifier's mean softmax confidence in the target class;
* feature distance — the mean over reconstructions of the minimum L2 distance, in an embedding space,
  to the training images of the target class (FaceNet at paper scale; by default the evaluation
  model's penultimate layer, :func:`penultimate`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import ShapeError
from ..results import Result


def penultimate(model: nn.Module):
    """The input of the model's last Linear layer, as a function ``x → N×D``."""
    last = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not last:
        raise ShapeError("the model has no Linear layer to take the penultimate features from.")
    store = {}

    def embed(x):
        handle = last[-1].register_forward_hook(lambda m, i, o: store.__setitem__("z", i[0]))
        try:
            model(x)
        finally:
            handle.remove()
        return torch.flatten(store["z"], 1)

    return embed


@dataclass(frozen=True)
class InversionMetrics(Result):
    n: int
    att_acc1: float
    att_acc1_ci: tuple
    att_acc5: float | None
    eval_conf: float
    feature_l2: float
    per_class_acc1: list


@torch.no_grad()
def evaluate_inversion(eval_model: nn.Module, images: torch.Tensor, targets: torch.Tensor, train_images: torch.Tensor,
                       train_labels: torch.Tensor, embed=None, batch: int = 256) -> InversionMetrics:
    from ..stats import wilson_interval

    if len(images) != len(targets):
        raise ShapeError(f"{len(images)} reconstructions but {len(targets)} targets.")
    eval_model = eval_model.eval()
    device = next(eval_model.parameters()).device
    embed = embed or penultimate(eval_model)
    logits = torch.cat([eval_model(images[i:i + batch].to(device)).cpu() for i in range(0, len(images), batch)])
    num_classes = logits.shape[1]
    top = logits.topk(min(5, num_classes), 1).indices
    hit1 = (top[:, 0] == targets)
    acc5 = float((top == targets[:, None]).any(1).float().mean()) if num_classes > 5 else None
    conf = torch.softmax(logits, 1).gather(1, targets[:, None]).squeeze(1)
    fe = torch.cat([embed(images[i:i + batch].to(device)).cpu() for i in range(0, len(images), batch)])
    ft = torch.cat([embed(train_images[i:i + batch].to(device)).cpu() for i in range(0, len(train_images), batch)])
    dists = []
    for c in targets.unique().tolist():
        sel = targets == c
        d = torch.cdist(fe[sel], ft[train_labels == c]).min(1).values
        dists.append(d)
    per_class = [float(hit1[targets == c].float().mean()) for c in sorted(targets.unique().tolist())]
    k = int(hit1.sum())
    return InversionMetrics(len(images), k / len(images), wilson_interval(k, len(images)), acc5,
                            float(conf.mean()), float(torch.cat(dists).mean()), per_class)
