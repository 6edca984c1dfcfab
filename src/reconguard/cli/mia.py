"""`reconguard train | evaluate | analyze`: classifiers with model-inversion defenses, and their leakage."""

from __future__ import annotations

import sys
from pathlib import Path

from ..experiments.params import AttackSettings, MIAParams, RobustSettings
from .common import resume_hint, claim_output, device_of, add_normalize_opt, add_run_opts, add_settings_flags


def _defense_options(args) -> dict:
    """The defense flags given (they come from the defenses' ``options``: :func:`defense_flags`)."""
    from ..defenses.registry import defense_flags
    from ..errors import ParameterError

    options = {}
    for arg, flag in defense_flags().items():
        value = getattr(args, "defense_" + arg)
        if value is None:
            continue
        if args.defense not in flag["defenses"]:
            raise ParameterError(f"{flag['flag']} does not apply to --defense {args.defense} "
                                 f"(it is for {', '.join(flag['defenses'])}).")
        options[arg] = tuple(value) if isinstance(value, list) else value
    return options


def _cmd_train(args, run) -> int:
    from ..classifiers import save_classifier
    from ..defenses.registry import defense_class
    from ..experiments.mia import load_split, pretrain_public, train_defended
    from ..errors import OutputError
    from ..io import atomic_directory, owner, remove_owned, write_json_atomic

    options = _defense_options(args)
    split = load_split(MIAParams(dataset=args.data, root=args.root, public_root=args.public_root, size=args.size))
    out = claim_output(run, args.out or f"runs/train/{split.train.name}-{args.model}-{args.defense}-seed{args.seed}", "dir")
    checkpoint = out.parent / f".{out.name}.checkpoint.pt"
    if checkpoint.exists() and not args.resume:
        remove_owned(checkpoint)  # a fresh run (reconguard's own checkpoint only); --resume continues from it
    elif args.resume and checkpoint.exists() and owner(checkpoint) is None:
        raise OutputError(f"{checkpoint} is in the way and was not written by reconguard; move it, or choose "
                          "another --out.")
    elif args.resume and not checkpoint.exists():
        print(f"reconguard: no checkpoint for {out} yet; starting from epoch 0", file=sys.stderr)
    run.interrupted_hint = resume_hint(run)
    cls = defense_class(args.defense)
    public_state = None
    if cls.needs_public_model and "pretrained" not in options:
        public_state = pretrain_public(split, args.model, args.width, args.epochs, args.seed, device_of(args.device))
    fit_options = {"batch_size": args.batch_size, "progress": not args.quiet, "checkpoint": checkpoint,
                   "settings": {k: v for k, v in sorted(vars(args).items()) if not k.startswith("_") and k not in
                                ("func", "quiet", "device", "out", "force", "resume", "epochs")}}
    if args.milestones:
        fit_options["milestones"] = args.milestones
    if args.gamma is not None:
        fit_options["gamma"] = args.gamma
    model, row, defense = train_defended(split, args.defense, options, arch=args.model, width=args.width,
                                         epochs=args.epochs, lr=args.lr, seed=args.seed, fit_options=fit_options,
                                         public_state=public_state, device=device_of(args.device))
    spec = {"arch": args.model, "num_classes": split.num_classes, "in_shape": list(split.train.shape),
            "width": args.width, "defense": args.defense, "structure": defense.structure(), "options": {
                k: (str(v) if k == "pretrained" else v) for k, v in options.items()}, "seed": args.seed,
            "data": args.data, "size": split.train.shape[-1]}
    inner = defense.saved_module(model)
    with atomic_directory(out, run.command, force=args.force) as tmp:
        save_classifier(tmp / "model.pt", inner.cpu(), spec, getattr(defense, "mask", None))
        write_json_atomic(tmp / "result.json", {"spec": spec, "result": row})
    if checkpoint.exists():
        remove_owned(checkpoint)
    extras = "".join(f", {k} {v}" for k, v in row.extras.items() if not isinstance(v, list))
    print(f"{args.defense} on {split.summary()}:")
    print(f"  test accuracy {row.test_acc:.3f}, train {row.train_acc:.3f}, validation {row.val_acc:.3f} "
          f"(epoch {row.best_epoch} of {row.epochs}), {row.seconds:.0f} s{extras}")
    print(f"  model: {out / 'model.pt'}")
    return 0


def _classifier(spec: str, args):
    """``(model, spec)``: a ``reconguard train`` file with its recipe, or any model :func:`reconguard.audit.loading.
    load_model` takes (the recipe then from ``--size``, on digits), in its ``--normalize`` convention."""
    from ..audit.loading import load_model
    from ..classifiers import load_classifier
    from ..errors import CorruptDataError, DataFileNotFoundError
    from ..nn.normalize import with_normalization

    try:
        model, recipe = load_classifier(spec)
    except (DataFileNotFoundError, CorruptDataError):
        if ":" not in str(spec) and not Path(spec).is_file():
            raise
        model, recipe = load_model(spec, args.weights), {"data": "digits", "size": args.size or 16,
                                                          "label": str(spec)}
        recipe["in_shape"] = [1, recipe["size"], recipe["size"]]
    model, norm = with_normalization(model, args.normalize, int(recipe.get("in_shape", [1])[0]))
    return model, {**recipe, "normalize": norm}


def _cmd_evaluate(args, run) -> int:
    from ..defenses.registry import NO_DEFENSE
    from ..experiments.mia import DefenseRow, load_split
    from ..metrics import accuracy
    from ..progress import progress
    from ..experiments.mia_eval import Evaluator
    from ..io import write_json_atomic

    out = claim_output(run, args.out or "runs/evaluate/results.json")
    loaded = [(path, *_classifier(path, args)) for path in args.models]
    first = loaded[0][2]
    split = load_split(MIAParams(dataset=first.get("data", "digits"), root=args.root, public_root=args.public_root,
                                 size=first.get("size", 16)))
    from ..checks import check_fits, check_positive_int

    check_positive_int(args.candidates, "--candidates")
    d = 1
    for v in first.get("in_shape", [1, 16, 16]):
        d *= int(v)
    # candidate images (and their generator activations, ~4×) per class, float32
    check_fits(4.0 * args.candidates * d * 4 * split.num_classes, f"--candidates {args.candidates}",
               "lower --candidates")
    keep = args.keep or min(20, args.candidates)
    attack = AttackSettings(candidates=args.candidates, keep=keep, steps=args.steps, finals=min(args.finals, keep),
                            space=args.space, loss=args.loss, generator_epochs=args.generator_epochs,
                            baseline=args.baseline)
    robust = RobustSettings(eps=tuple(args.eps), n=args.n, steps=args.robust_steps,
                            n_queries=args.n_queries) if args.eps else None
    p = MIAParams(attack=attack, robustness=robust, eval_epochs=args.eval_epochs)
    device = device_of(args.device)
    evaluator = Evaluator(split, p, device=device, progress=not args.quiet)
    rows = []
    for path, model, spec in progress(loaded, "evaluate", unit="model", enabled=not args.quiet and len(loaded) > 1):
        model = model.to(device)
        row = DefenseRow(spec.get("defense", NO_DEFENSE), spec.get("label", spec.get("defense", NO_DEFENSE)),
                         int(spec.get("seed", 0)), accuracy(model, split.test), accuracy(model, split.train), float("nan"),
                         -1, 0, 0.0, {"model": str(path)})
        evaluation, _ = evaluator.evaluate(model, row)
        row = DefenseRow(**{**{f: getattr(row, f) for f in row.__dataclass_fields__}, "evaluation": evaluation})
        rows.append(row)
        att = evaluation.get("attack", {})
        rob = "  ".join(f"ε={e}: {v['worst']:.3f}" for e, v in (evaluation.get("robust") or {}).items())
        print(f"{path}: {row.defense} test {row.test_acc:.3f}  AttAcc@1 {att.get('att_acc1', float('nan')):.3f} "
              f"[{att.get('att_acc1_ci', (0, 0))[0]:.2f}, {att.get('att_acc1_ci', (0, 0))[1]:.2f}]  {rob}")
    write_json_atomic(out, {"evaluation_model_test_acc": getattr(evaluator, "eval_acc", None), "rows": rows})
    print(f"results: {out}")
    return 0


def _cmd_analyze(args, run) -> int:
    import json

    from ..errors import CorruptDataError, DataFileNotFoundError
    from ..experiments.mia import DefenseRow
    from ..experiments.mia_eval import analyse
    from ..io import write_json_atomic

    out = claim_output(run, args.out or "runs/analyze/analysis.json")
    rows = []
    for path in args.results:
        path = Path(path)
        if not path.is_file():
            raise DataFileNotFoundError(f"results file {path} does not exist (write one with `reconguard evaluate`).")
        try:
            blob = json.loads(path.read_text())
            items = blob["rows"]
            rows += [DefenseRow(**{k: v for k, v in item.items() if k in DefenseRow.__dataclass_fields__}) for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"{path}: not an evaluate/run results file ({exc}).") from exc
    analysis = analyse(rows, MIAParams())
    if not analysis:
        raise CorruptDataError("no attacked models in these results: run `reconguard evaluate` first.")
    for key in ("ols_hc2", "beta"):
        fit = analysis.get(key)
        if fit:
            r2 = fit.get("rsquared_adj", fit.get("pseudo_rsquared"))
            print(f"{key}: R² {r2:.3f}, MAE {fit['mae']:.3f}")
            for n, c, (lo, hi), pv in zip(fit["names"], fit["params"], fit["ci"], fit["pvalues"]):
                print(f"  {n:22s} {c:+.4f}  [{lo:+.4f}, {hi:+.4f}]  p={pv:.3g}")
        elif f"{key}_error" in analysis:
            print(f"{key}: not fitted — {analysis[key + '_error']}")
    if "regression_note" in analysis:
        print(analysis["regression_note"])
    t = analysis.get("treatment")
    if t:
        print(f"AT-AT vs NoDef: AttAcc@1 {t['mu_control']:.3f} → {t['mu_treated']:.3f}; odds ratio {t['odds_ratio']:.3g} "
              f"(95% CI {t['odds_ratio_ci'][0]:.3g}–{t['odds_ratio_ci'][1]:.3g}), Δ {t['delta']:+.3f}")
    elif "treatment_error" in analysis:  # the units exist but cannot be compared: say so rather than print nothing
        print(f"AT-AT vs NoDef: not estimated — {analysis['treatment_error']}")
    write_json_atomic(out, analysis)
    print(f"analysis: {out}")
    return 0


def register(sub) -> None:
    from ..classifiers import ARCHS
    from ..defenses.registry import NO_DEFENSE, defense_flags, defense_names

    sp = sub.add_parser("train", help="train a classifier with a model-inversion defense (AT-AT, MID, BiDO, …)")
    sp.add_argument("--data", choices=["digits", "folder"], default="digits",
                    help="digits: private 0–4, public 5–9 (ships with scikit-learn); folder: --root DIR/<class>/<img>")
    sp.add_argument("--root", help="private image folder (root/<identity>/<image>) for --data folder")
    sp.add_argument("--public-root", help="public image folder (other identities) for --data folder")
    sp.add_argument("--size", type=int, help="image side (default 16 for digits, 224 for folders)")
    sp.add_argument("--model", choices=ARCHS, default="resnet18")
    sp.add_argument("--width", type=int, default=16, help="ResNet base width (64 = torchvision)")
    sp.add_argument("--defense", choices=defense_names(), default=NO_DEFENSE)
    sp.add_argument("--epochs", type=int, default=30)
    sp.add_argument("--lr", type=float, default=1e-3)
    sp.add_argument("--batch-size", type=int, default=128)
    sp.add_argument("--milestones", type=int, nargs="*", help="MultiStepLR epochs (default: 75%% of the epochs)")
    sp.add_argument("--gamma", type=float, help="MultiStepLR decay (default 0.1)")
    sp.add_argument("--seed", type=int, default=0)
    g = sp.add_argument_group("defense options (each applies to the defenses named; ε and steps in pixel units)")
    for arg, flag in defense_flags().items():
        g.add_argument(flag["flag"], dest="defense_" + arg, type=flag["type"], nargs=flag["nargs"], metavar=arg.upper(),
                       help=f"{flag['help']} [{', '.join(flag['defenses'])}]")
    sp.add_argument("--resume", action="store_true", help="continue an interrupted run from its last checkpoint "
                    "(kept beside --out until the run completes); the final weights equal an uninterrupted run's")
    add_run_opts(sp, _cmd_train, "output folder: model.pt + result.json "
                 "(default runs/train/<data>-<model>-<defense>-seed<seed>)")

    sp = sub.add_parser("evaluate", help="attack trained classifiers (model inversion) and measure robust accuracy")
    sp.add_argument("models", nargs="+", help="model.pt files written by `reconguard train`, or your classifiers: "
                    "path/to/file.py:NAME, package.module:NAME (with --weights) or TorchScript .pt (on digits)")
    sp.add_argument("--weights", help="a state dict (.pt, weights_only) or .safetensors for a file.py:NAME model")
    sp.add_argument("--size", type=int, help="your classifiers' digit image side (default 16)")
    add_normalize_opt(sp)
    sp.add_argument("--root", help="private image folder, for models trained on --data folder")
    sp.add_argument("--public-root", help="public image folder (the attacker's generator trains on it)")
    add_settings_flags(sp, AttackSettings, {
        "candidates": "prior samples scored per class before optimisation",
        "steps": "latent optimisation steps (0: selection only)", "finals": "reconstructions kept per class",
        "loss": ("the identity loss of the latent optimisation (PPA: poincare; ce was stronger on 16×16 digits)",
                 ("poincare", "ce")),
        "space": ("search the generator's latent + intermediate features or its latent only", ("intermediate", "latent")),
        "generator_epochs": "epochs of the attacker's VAE prior on the public data"})
    sp.add_argument("--keep", type=int, help="candidates kept per class for optimisation (default min(20, candidates))")
    sp.add_argument("--baseline", action="store_true", help="also run plain gradient inversion")
    robust = RobustSettings()
    sp.add_argument("--eps", type=float, nargs="*", default=list(robust.eps),
                    help="robust-accuracy radii in pixel units (none: skip robustness)")
    sp.add_argument("--n", type=int, default=robust.n, help="test images for robust accuracy")
    sp.add_argument("--robust-steps", type=int, default=robust.steps)
    sp.add_argument("--n-queries", type=int, default=robust.n_queries, help="Square attack queries")
    sp.add_argument("--eval-epochs", type=int, default=MIAParams.eval_epochs, help="epochs of the evaluation classifier")
    add_run_opts(sp, _cmd_evaluate, "results JSON (default runs/evaluate/results.json)")

    sp = sub.add_parser("analyze", help="regressions of leakage on robustness, and the AT-AT vs NoDef experiment")
    sp.add_argument("results", nargs="+", help="results JSON files from `reconguard evaluate` or `reconguard run`")
    sp.add_argument("--out", help="analysis JSON (default runs/analyze/analysis.json)")
    sp.set_defaults(func=_cmd_analyze)
