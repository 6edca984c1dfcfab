"""Model-inversion defenses at small scale (AT-AT paper sections 3–6, scaled to digits).

``train_defended`` trains one classifier with one defense through :func:`reconguard.train.fit` on the
private split (digits 0–4 by default) and measures train / validation / test accuracy; TL-DMI starts
from a model pre-trained on the public split (digits 5–9), as transfer learning needs. The permuted-
label model is scored on its permuted training labels (train accuracy) and the true test labels.
"""

from __future__ import annotations

import json

import time
from dataclasses import dataclass, field

import torch
from torch import nn

from ..augment import Augment
from ..classifiers import build_classifier
from ..data.splits import MIASplit
from ..metrics import accuracy
from .params import MIAParams
from ..defenses.registry import EXPERIMENT, NO_DEFENSE, defense_class, make_defense
from ..progress import progress as progress_bar
from ..results import RecipeResult, Result
from ..train import fit


@dataclass(frozen=True)
class DefenseRow(Result):
    defense: str
    label: str
    seed: int
    test_acc: float
    train_acc: float
    val_acc: float
    best_epoch: int
    epochs: int
    seconds: float
    extras: dict = field(default_factory=dict)
    evaluation: dict = field(default_factory=dict)  # filled by the attack / robustness stages
    history: list = field(default_factory=list)     # fit's per-epoch records


@dataclass(frozen=True)
class MIAResult(RecipeResult):
    rows: list = field(default_factory=list)
    elapsed_s: float = 0.0
    split: str = ""
    analysis: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    _skip_in_dict = ("examples",)


def pretrain_public(split: MIASplit, arch: str, width: int | None, epochs: int, seed: int, device=None) -> dict:
    """A classifier trained on the public split; TL-DMI starts from its weights (head excluded)."""
    model = build_classifier(arch, int(split.public.labels.max()) + 1, split.train.shape, width, seed + 7)
    fit(model, split.public, None, epochs=epochs, seed=seed + 7, device=device, progress=False,
        augment=Augment(flip=False), select="last")
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def train_defended(split: MIASplit, name: str, options: dict | None = None, *, arch: str = "resnet18",
                   width: int | None = 16, epochs: int = 30, lr: float = 1e-3, seed: int = 0, label: str | None = None,
                   fit_options: dict | None = None, public_state: dict | None = None, augment: bool = True,
                   device=None) -> tuple[nn.Module, DefenseRow, object]:
    """One model with one defense; returns (model as evaluated, row, defense object)."""
    options = dict(options or {})
    cls = defense_class(name)
    if cls.needs_public_model and "pretrained" not in options:
        options["pretrained"] = public_state
    defense = make_defense(name, options)
    model = build_classifier(arch, split.num_classes, split.train.shape, width, seed)
    fo = {"epochs": epochs, "lr": lr, "milestones": [int(epochs * 0.75)], **getattr(defense, "fit_options", {}),
          **(fit_options or {})}
    crops = {"crop": (0.85, 1.0), "no-crop": None}
    aug = Augment(flip=False, crop_scale=crops[cls.augmentation]) if augment and cls.augmentation else None
    if not cls.checkpoints:
        fo.pop("checkpoint", None)
    start = time.perf_counter()
    progress = fo.pop("progress", False)
    result = fit(model, split.train, split.val, seed=seed, device=device, progress=progress, augment=aug,
                 defense=defense, **fo)
    seconds = time.perf_counter() - start
    deployed = defense.deploy(model)
    train_acc = accuracy(deployed, split.train, defense.train_labels(split.train.labels))
    extras = {}
    last = result.history[-1] if result.history else {}
    for key in ("pixels_deleted", "label_smoothing"):
        if key in last:
            extras[key] = last[key]
    extras.update(defense.report())
    row = DefenseRow(name, label or name, seed, accuracy(deployed, split.test), train_acc,
                     result.best_val_acc, result.best_epoch, result.epochs_run, seconds, extras,
                     history=result.history)
    return deployed, row, defense


def expand_defenses(specs: list) -> list[dict]:
    """Recipe entries → ``{"name", "label", "options", "fit"}``; a bare string is a defense with defaults."""
    from ..defenses.registry import DEFENSES
    from ..errors import UnknownOptionError

    out = []
    for spec in specs:
        spec = {"name": spec} if isinstance(spec, str) else dict(spec)
        if spec.get("name") not in DEFENSES:
            raise UnknownOptionError(f"unknown defense {spec.get('name')!r}; choose from {', '.join(DEFENSES)}.")
        bad = set(spec) - {"name", "label", "options", "fit"}
        if bad:
            raise UnknownOptionError(f"defense entry {spec['name']}: unknown keys {sorted(bad)} "
                                     "(allowed: name, label, options, fit).")
        spec.setdefault("label", spec["name"])
        out.append(spec)
    return out


def plan_jobs(p: MIAParams) -> list[tuple[dict, int]]:
    """(defense spec, seed) pairs: every defense × seed, then the randomised units (appendix H): of
    ``units`` models, a seeded random half gets ``treated`` and the rest ``control``; unit i uses seed i."""
    specs = expand_defenses(list(p.defenses))
    jobs = [(spec, int(seed)) for seed in p.seeds for spec in specs]
    r = p.randomised
    if r:
        from ..errors import UnknownOptionError
        bad = set(r) - {"units", "treated", "control", "seed"}
        if bad:
            raise UnknownOptionError(f"randomised: unknown keys {sorted(bad)} (allowed: units, treated, control, seed).")
        units = int(r.get("units", 10))
        treated, control = expand_defenses([r.get("treated", EXPERIMENT[0]), r.get("control", EXPERIMENT[1])])
        order = torch.randperm(units, generator=torch.Generator().manual_seed(int(r.get("seed", 0)))).tolist()
        is_treated = set(order[:units // 2])
        jobs += [(treated if i in is_treated else control, 100 + i) for i in range(units)]
    if not jobs:
        jobs = [(expand_defenses([NO_DEFENSE])[0], 0)]
    return jobs


def load_split(p: MIAParams) -> MIASplit:
    from ..data.splits import digits_mia_split, folder_mia_split

    if p.dataset == "digits":
        return digits_mia_split(int(p.size or 16), p.split_seed)
    if p.dataset == "digit-instances":
        from ..data.instances import digits_instance_split
        return digits_instance_split(int(p.size or 32), p.instances, p.copies, seed=p.split_seed)
    if p.dataset == "fashion-instances":
        from ..data.instances import fashion_instance_split
        return fashion_instance_split(int(p.size or 32), p.instances, p.copies, seed=p.split_seed, root=p.root)
    if p.dataset != "folder":
        from ..errors import UnknownOptionError
        raise UnknownOptionError(f"dataset must be digits, digit-instances, fashion-instances or folder, got "
                                 f"{p.dataset!r}.")
    if p.root is None:
        from ..errors import ParameterError
        raise ParameterError("dataset: folder needs root (the private image folder, root/<identity>/<image>).")
    return folder_mia_split(p.root, p.public_root, int(p.size or 224), p.split_seed)


def run_mia(recipe: dict, preset: str, p: dict, params: MIAParams, progress: bool, device, units=None) -> MIAResult:
    """Train every (defense, seed) of the recipe (``params``: its typed settings, whole; ``p``: as recorded); then,
    when asked, attack and measure robustness (:mod:`reconguard.experiments.mia_eval`) and fit the analysis.
    ``units``: a :class:`~reconguard.experiments.units.UnitCache` (finished models are not trained again)."""
    from .units import UnitCache, plain, restore

    units = units or UnitCache(None, p)
    split = load_split(params)
    jobs = plan_jobs(params)
    arch, width, epochs = params.arch, params.width, params.epochs
    evaluator = None
    if params.attack or params.robustness:
        from .mia_eval import Evaluator
        evaluator = Evaluator(split, params, device=device)
    start = time.perf_counter()
    public_state = None
    rows, examples = [], {}
    with progress_bar(desc=recipe["name"], total=len(jobs), unit="model", enabled=progress) as bar:
        for spec, seed in jobs:
            key = json.dumps([spec, seed], sort_keys=True, default=str)
            saved = units.get(key)
            if saved is not None:
                row = restore(DefenseRow, saved["row"])
                if saved.get("example") is not None and row.label not in examples:
                    examples[row.label] = saved["example"]
                rows.append(row)
                bar.update(1)
                continue
            if defense_class(spec["name"]).needs_public_model and public_state is None:
                public_state = pretrain_public(split, arch, width, params.public_epochs or epochs, 0, device)
            model, row, _ = train_defended(split, spec["name"], spec.get("options"), arch=arch, width=width,
                                           epochs=epochs, lr=params.lr, seed=seed,
                                           label=spec["label"], fit_options=spec.get("fit"),
                                           public_state=public_state, device=device)
            ex = None
            if evaluator is not None:
                evaluation, ex = evaluator.evaluate(model, row)
                row = DefenseRow(**{**{f: getattr(row, f) for f in row.__dataclass_fields__}, "evaluation": evaluation})
                if ex is not None and row.label not in examples:
                    examples[row.label] = ex
            rows.append(row)
            units.put(key, {"row": plain(row), "example": ex})
            bar.update(1)
            bar.set_postfix(defense=row.label, test=f"{row.test_acc:.3f}")
    analysis = {}
    if evaluator is not None and params.analysis:
        from .mia_eval import analyse
        analysis = analyse(rows, params)
    return MIAResult(recipe["name"], preset, recipe["title"], p, rows, time.perf_counter() - start, split.summary(),
                     analysis, examples)
