"""Audit a user's own classifier for model inversion: the leakage table of the AT-AT paper for their model.

Given the model, its private training data (labelled, to train the separate evaluation classifier that scores
AttAcc and to measure accuracy and robustness) and public data of the same kind (the attacker's prior is trained
on it only), this runs:

- the generative-prior attack (PPA-style: sample → select → optimise; AT-AT paper appendix A.5 / C.2),
- the same attack with 0 optimisation steps (**selection only**: how much leakage needs no input gradients —
  what a defense that keeps accuracy cannot touch),
- plain gradient inversion (Fredrikson et al.; no prior),
- the **chance** row a guess scores (AttAcc@1 = 1/C),

and robust accuracy at the paper's ε list (Table 4) and HSIC at the model's ``hsic_layers`` when it names them.
AttAcc@1 carries its Wilson 95 % interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..errors import ParameterError, ShapeError, UnknownOptionError
from ..results import Result
from .loading import load_images, load_model, probe

PRESETS = {
    "smoke": {"candidates": 32, "keep": 4, "steps": 5, "finals": 2, "generator_epochs": 3, "baseline_steps": 10,
              "eval_epochs": 3, "robust_n": 32, "robust_steps": 3, "n_queries": 10, "attacks": ("apgd-ce",)},
    "cpu": {"candidates": 500, "keep": 20, "steps": 60, "finals": 5, "generator_epochs": 60, "baseline_steps": 200,
            "eval_epochs": 20, "robust_n": 128, "robust_steps": 10, "n_queries": 100, "attacks": None},
    "paper": {"candidates": 5000, "keep": 100, "steps": 70, "finals": 50, "generator_epochs": 200,
              "baseline_steps": 500, "eval_epochs": 40, "robust_n": 1000, "robust_steps": 20, "n_queries": 1000,
              "attacks": None},
}


@dataclass(frozen=True)
class ClassifierAudit(Result):
    model: str
    num_classes: int
    in_shape: tuple
    data: str
    test_acc: float
    eval_acc: float             # the evaluation classifier that scores AttAcc
    leakage: dict               # attack → evaluate_inversion's numbers (att_acc1, att_acc1_ci, …); chance last
    robust: dict                # ε → robust accuracy (worst over the attacks)
    hsic: dict
    preset: str
    seconds: float
    examples: dict = field(default_factory=dict)
    normalize: dict | None = None  # the pixel convention applied inside the model (images stay in [0, 1])
    warnings: tuple = ()
    _skip_in_dict = ("examples",)

    kind = "classifier"


def _split(private, public, num_classes: int | None, size: int | None, seed: int):
    from ..data import ImageDataset
    from ..data.splits import MIASplit, digits_mia_split, split_private

    if str(private) == "digits":
        if str(public) != "digits":
            raise ParameterError("--private digits goes with --public digits (private 0–4, public 5–9).")
        return digits_mia_split(size or 16, seed), "digits (private 0–4, public 5–9)"
    x, y = load_images(private, labels=True)
    if y is None:
        raise ParameterError(f"--private {private}: needs labels — a folder with one sub-folder per class, or a .npz "
                             "with 'images' and 'labels'.")
    pub = load_images(public)
    if tuple(pub.shape[1:]) != tuple(x.shape[1:]):
        raise ShapeError(f"--public images are {tuple(pub.shape[1:])} but --private images are {tuple(x.shape[1:])}.")
    C = int(num_classes or int(y.max()) + 1)
    train, val, test = split_private(ImageDataset(x, y, "private"), seed)
    return MIASplit(train, val, test, ImageDataset(pub, None, "public"), C), str(private)


def classifier(model, private="digits", public="digits", *, num_classes: int | None = None, weights=None,
               preset: str = "smoke", eps=None, size: int | None = None, device=None, seed: int = 0,
               progress: bool = False, normalize=None) -> ClassifierAudit:
    """Audit ``model`` (an ``nn.Module`` or a spec for :func:`~reconguard.audit.loading.load_model`); ``normalize``
    the pixel convention it expects (:func:`~reconguard.nn.normalize.with_normalization`)."""
    from ..defenses.registry import NO_DEFENSE
    from ..experiments.mia import DefenseRow
    from ..experiments.mia_eval import Evaluator
    from ..experiments.params import AttackSettings, MIAParams, RobustSettings
    from ..metrics import accuracy
    from ..metrics.robustness import ATTACKS, PAPER_EPS
    from ..stats import wilson_interval

    if preset not in PRESETS:
        raise UnknownOptionError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}.")
    cfg = PRESETS[preset]
    start = time.perf_counter()
    name = model if isinstance(model, str) else type(model).__name__
    split, data_name = _split(private, public, num_classes, size, seed)
    if num_classes is not None and int(num_classes) != split.num_classes:
        raise ParameterError(f"--classes {num_classes} but the private data has {split.num_classes} classes "
                             f"({data_name}); drop --classes or give the data the model was trained on.")
    device = torch.device(device) if device is not None else torch.device("cpu")
    from ..nn.normalize import first_batchnorm_mismatch, with_normalization

    module, norm = with_normalization(load_model(model, weights), normalize, int(split.test.images.shape[1]))
    warning = first_batchnorm_mismatch(module, split.test.images[:64])
    target, m = probe(module.to(device), split.test.images[:2].to(device), flatten=False)
    if m != split.num_classes:
        raise ShapeError(f"the model gives {m} outputs per image; a classifier of the {split.num_classes} private "
                         f"classes gives {split.num_classes} logits.")
    warnings = ((warning,) if warning else ()) + _masked_gradients(target, split.test.images[:8].to(device), device)
    attack = AttackSettings(candidates=cfg["candidates"], keep=cfg["keep"], steps=cfg["steps"], finals=cfg["finals"],
                            generator_epochs=cfg["generator_epochs"], baseline_steps=cfg["baseline_steps"], loss="ce")
    robust = RobustSettings(eps=tuple(eps if eps is not None else PAPER_EPS), n=cfg["robust_n"],
                            steps=cfg["robust_steps"], n_queries=cfg["n_queries"],
                            attacks=tuple(cfg["attacks"] or ATTACKS))
    evaluator = Evaluator(split, MIAParams(attack=attack, robustness=robust, eval_epochs=cfg["eval_epochs"]),
                          device=device, progress=progress)
    test_acc = accuracy(target, split.test)
    row = DefenseRow(NO_DEFENSE, "your model", seed, test_acc, accuracy(target, split.train), float("nan"), -1, 0, 0.0)
    evaluation, example = evaluator.evaluate(target, row)
    leakage = {"generative prior (PPA-style)": evaluation["attack"],
               "selection only (0 steps)": evaluation["selection_only"],
               "gradient inversion (no prior)": evaluation["baseline"]}
    n, chance = split.num_classes * cfg["finals"], 1.0 / split.num_classes  # as many guesses as reconstructions
    leakage["chance (a guess)"] = {"att_acc1": chance, "att_acc1_ci": tuple(wilson_interval(round(chance * n), n))}
    rob = {e: v["worst"] for e, v in (evaluation.get("robust") or {}).items()}
    return ClassifierAudit(str(name), split.num_classes, tuple(split.train.shape), data_name, test_acc,
                           float(evaluator.eval_acc), leakage, rob, evaluation.get("hsic") or {}, preset,
                           time.perf_counter() - start, example or {}, norm, warnings)


def _masked_gradients(target, images: torch.Tensor, device) -> tuple:
    """A warning when autograd's gradient does not describe the classifier (the path check of
    :mod:`reconguard.bounds.differentiable` on its logits between four pairs of test images): no_grad, detach, argmax
    or rounding inside forward mask the gradient, so gradient attacks fail — robust accuracy then reads as clean
    accuracy, and the gradient-based inversions find nothing — without the model being robust or private. Four pairs
    (68 products J·v), not the encoder check's two: an argmax output moves only between images of other classes."""
    from ..bounds.differentiable import PATH_TOL, path_error
    from ..bounds.jacobians import jacobian_ready

    with jacobian_ready(target, images, "native", device) as (enc, xs, _, _):  # a warning: float32 round-off is far
        # below the tolerance, and a large classifier's float64 copy is not needed
        error = path_error(enc, xs, pairs=len(xs) // 2)
    if error is None or error <= PATH_TOL:
        return ()
    return (f"the model's logits change where autograd's gradient says they do not (path check error {error:.2f} > "
            f"{PATH_TOL}: no_grad, detach, argmax or rounding inside forward): its gradients are masked, so the robust "
            "accuracy below, measured by gradient attacks, is no evidence of robustness, and the gradient-based "
            "inversions are no evidence of privacy.",)

