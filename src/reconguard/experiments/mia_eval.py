"""Attack, measure and analyse the defended models of a ``mia`` recipe (AT-AT paper sections 3–6,
appendices F.3, G, H, I.3), at small scale.

:class:`Evaluator` builds, once per run and from data the attacker may use: the evaluation classifier
(another architecture — the 3-block CNN — trained on the private training set, as PPA's Inception-v3
is) and the generative prior (a VAE on the public split only). For each defended model it then
measures: the generative-prior attack (AttAcc@1 with a Wilson interval, EvalConf, feature distance),
optionally the gradient-inversion baseline, robust accuracy under the AutoAttack ensemble at each ε,
and HSIC(X, Z_j) at the model's stage outputs (Table 1). :func:`analyse` fits the paper's OLS (HC2)
and Beta regressions of leakage on accuracy and robust accuracies, the cost of privacy, and the
randomised AT-AT vs NoDef experiment (odds ratio, Δ).
"""

from __future__ import annotations

import torch
from torch import nn

from ..attacks.inversion import GenerativeInversion, GradientInversion, train_generator
from ..augment import Augment
from ..classifiers import build_classifier
from ..errors import ReconguardError
from ..defenses.registry import EXPERIMENT, defense_class
from ..metrics import accuracy, evaluate_inversion, hsic, robust_accuracy
from ..train import fit
from .params import MIAParams

class Evaluator:
    """The leakage of one trained classifier: model inversion (scored by a separate evaluation classifier),
    robust accuracy and HSIC, as ``p.attack`` / ``p.robustness`` ask (:class:`~.params.MIAParams`)."""

    def __init__(self, split, p: MIAParams, device=None, progress: bool = False):
        self.split, self.device = split, device or torch.device("cpu")
        self.attack, self.robust = p.attack, p.robustness
        self.eval_model = None
        if self.attack:
            self.eval_model = build_classifier(p.eval_arch, split.num_classes, split.train.shape, 16, 11)
            fit(self.eval_model, split.train, split.val, epochs=p.eval_epochs, seed=11,
                device=self.device, progress=progress, augment=Augment(flip=False))
            self.eval_acc = accuracy(self.eval_model, split.test)
            self.generator = train_generator(split.public, self.attack.latent_dim, self.attack.generator_epochs,
                                             seed=13, device=self.device, progress=progress)
            self.train_images = split.train.images
            self.train_labels = split.train.labels

    def evaluate(self, model: nn.Module, row) -> tuple[dict, dict | None]:
        out, example = {}, None
        model = model.to(self.device).eval()
        if self.attack:
            a = self.attack
            if not defense_class(row.defense).labels_meaningful:
                out["attack_note"] = "labels permuted: AttAcc is not defined (the paper reports L2 only)"
            settings = dict(candidates=a.candidates, keep=a.keep, lr=a.lr, finals=a.finals, space=a.space,
                            feature_scale=a.feature_scale, loss=a.loss, seed=row.seed)
            res = GenerativeInversion(model, self.generator, steps=a.steps, **settings).run(a.classes,
                                                                                           self.split.num_classes)
            met = evaluate_inversion(self.eval_model, res.images, res.targets, self.train_images, self.train_labels)
            out["attack"] = {**met.to_dict(), "seconds": res.seconds}
            if a.selection_only:  # the same attack with no gradient step: the leakage a defense keeping accuracy
                # cannot touch, since the target only picks among the prior's samples
                sel = GenerativeInversion(model, self.generator, steps=0, **settings).run(a.classes,
                                                                                          self.split.num_classes)
                sm = evaluate_inversion(self.eval_model, sel.images, sel.targets, self.train_images, self.train_labels)
                out["selection_only"] = {**sm.to_dict(), "seconds": sel.seconds}
            example = {"images": res.images, "targets": res.targets}
            if a.baseline:
                base = GradientInversion(model, self.split.train.shape, steps=a.baseline_steps, per_class=a.finals,
                                         seed=row.seed).run(a.classes, self.split.num_classes)
                bm = evaluate_inversion(self.eval_model, base.images, base.targets, self.train_images, self.train_labels)
                out["baseline"] = {**bm.to_dict(), "seconds": base.seconds}
        if self.robust:
            r = self.robust
            n = min(r.n, len(self.split.test))
            x, y = self.split.test.images[:n], self.split.test.labels[:n]
            out["robust"] = {f"{float(e):g}": robust_accuracy(model, x, y, float(e), attacks=list(r.attacks),
                                                               steps=r.steps, n_queries=r.n_queries,
                                                               seed=row.seed).to_dict() for e in r.eps}
        out["hsic"] = layer_hsic(model, self.split.train.images[:128])
        return out, example


@torch.no_grad()
def layer_hsic(model: nn.Module, x: torch.Tensor) -> dict:
    """HSIC(X, Z_j) at the model's ``hsic_layers`` (BiDO's estimator, σ = 5) on one batch; {} if none."""
    inner = model[-1] if isinstance(model, nn.Sequential) and hasattr(model[-1], "hsic_layers") else model
    layers = getattr(inner, "hsic_layers", None)
    if not layers:
        return {}
    store = {}
    handles = [inner.get_submodule(n).register_forward_hook(lambda m, i, o, n=n: store.__setitem__(n, o)) for n in layers]
    try:
        model(x.to(next(model.parameters()).device))
    finally:
        for h in handles:
            h.remove()
    return {n: float(hsic(x.to(store[n].device), store[n])) for n in layers}


def analyse(rows, p: MIAParams) -> dict:
    """OLS (HC2) / Beta regressions of AttAcc@1, the cost of privacy, and the randomised experiment."""
    from ..stats import beta_regression, cost_of_privacy, ols, treatment_effect

    out: dict = {}
    scored = [r for r in rows if "attack" in r.evaluation and defense_class(r.defense).labels_meaningful]
    if not scored:
        return out
    y = [r.evaluation["attack"]["att_acc1"] for r in scored]
    # the randomised experiment (appendix H): AT-AT (treated) vs NoDef (control) units
    randomised = p.randomised or {}
    treated, control = randomised.get("treated", EXPERIMENT[0]), randomised.get("control", EXPERIMENT[1])
    treated, control = (x if isinstance(x, str) else x["name"] for x in (treated, control))
    units = [(r, 1.0 if r.defense == treated else 0.0) for r in scored if r.defense in (treated, control)]
    if sum(d for _, d in units) >= 2 and sum(1 - d for _, d in units) >= 2:
        try:
            te = treatment_effect([r.evaluation["attack"]["att_acc1"] for r, _ in units], [d for _, d in units])
            out["treatment"] = te.to_dict()
            tacc = {d: [r.test_acc for r, dd in units if dd == d] for d in (0.0, 1.0)}
            out["treatment"]["test_acc_control"] = sum(tacc[0.0]) / len(tacc[0.0])
            out["treatment"]["test_acc_treated"] = sum(tacc[1.0]) / len(tacc[1.0])
        except ReconguardError as exc:
            out["treatment_error"] = str(exc)
        for key in ("selection_only", "baseline"):  # the same experiment on the attacks beside the main one
            if all(key in r.evaluation for r, _ in units):
                try:
                    te = treatment_effect([r.evaluation[key]["att_acc1"] for r, _ in units], [d for _, d in units])
                    out[f"treatment_{key}"] = te.to_dict()
                except ReconguardError as exc:
                    out[f"treatment_{key}_error"] = str(exc)
    # the gate (AT-AT paper Table 4): the control's robust accuracy at the largest ε — near 0 in the paper's
    # regime, where the attack needs the model's gradients; large when the classes rest on robust features
    ctrl = [r for r in rows if r.defense == control and "robust" in r.evaluation]
    if ctrl:
        e = max(ctrl[0].evaluation["robust"], key=float)
        vals = [r.evaluation["robust"][e]["worst"] for r in ctrl]
        out["gate"] = {"defense": control, "eps": float(e), "robust_acc": sum(vals) / len(vals), "n": len(vals),
                       "near_zero": sum(vals) / len(vals) <= 0.1}
    # the tradeoff regressions (section 4): leakage on clean accuracy and robust accuracies
    if all("robust" in r.evaluation for r in scored):
        eps = [e for e in scored[0].evaluation["robust"] if all(e in r.evaluation["robust"] for r in scored)]
        cols, names = [[r.test_acc for r in scored]], ["test_acc"]
        for e in eps:
            col = [r.evaluation["robust"][e]["worst"] for r in scored]
            if max(col) - min(col) > 1e-9:
                cols.append(col)
                names.append(f"robust_eps={e}")
        X = list(zip(*cols))
        if len(scored) > len(names) + 2:
            fits = {}
            for kind, fn in (("ols_hc2", lambda: ols(y, X, "HC2", names=names)),
                             ("beta", lambda: beta_regression(y, X, names=names))):
                try:
                    fits[kind] = fn()
                    out[kind] = fits[kind].to_dict()
                except (ReconguardError, ValueError, RuntimeError, ArithmeticError) as exc:
                    out[f"{kind}_error"] = str(exc)
            if "beta" in fits:
                out["cost_of_privacy"] = {n: cost_of_privacy(fits["beta"], n).to_dict() for n in names[1:]}
        else:
            out["regression_note"] = (f"{len(scored)} models for {len(names) + 1} parameters: too few to fit the "
                                      "tradeoff regression (add defenses or seeds)")
    return out
