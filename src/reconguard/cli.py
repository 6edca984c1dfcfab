"""The ``reconguard`` command.

    reconguard demo                       the main job: Figure-2 sweep → runs/demo/ (report.html, PNGs, JSON)
    reconguard run RECIPE [--preset P]    run a built-in recipe by name, or a YAML file by path
    reconguard recipes                    list the built-in recipes
    reconguard bound --data D --encoder E print every MSE bound for one encoder, write JSON
    reconguard score train|check          fit a denoising score model / check a score's S (Figure 7)
    reconguard train-encoder              train a split encoder jointly with its downstream model
    reconguard train --defense D          train a classifier with a model-inversion defense (AT-AT, MID, …)
    reconguard evaluate MODEL…            model-inversion leakage (AttAcc@1), robust accuracy, HSIC per model
    reconguard analyze RESULTS…           OLS (HC2) / Beta regressions and the AT-AT vs NoDef experiment
    reconguard instahide prepare-public|train   InstaHide's public patch pool; train with InstaHide / baselines
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import ReconguardError


def _claim(args, path, kind: str = "file") -> Path:
    """Check that this run may write ``path`` (``reconguard.io.check_output``: new, or an earlier result of the
    same command, or ``--force``) and hold its lock until the command ends. Call before the work starts."""
    from .io import claim_output

    path = Path(path)
    args._stack.enter_context(claim_output(path, args._command, kind=kind, force=getattr(args, "force", False)))
    args._claimed.append((path, kind))
    return path


def _param_name(prefix: str, args, keys) -> str:
    """``prefix`` plus a short digest of every option in ``keys``: runs with other settings get other files."""
    import hashlib
    import json

    blob = json.dumps({k: getattr(args, k, None) for k in keys}, sort_keys=True, default=str)
    return f"{prefix}-{hashlib.sha1(blob.encode()).hexdigest()[:8]}"


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _cmd_run(args, recipe: str) -> int:
    from .report import run_to_report, summary_text

    out = _claim(args, Path(args.out) if args.out else Path("runs") / (args.name or Path(recipe).stem), "dir")
    args._interrupted_hint = ("finished units are kept; resume with: reconguard "
                              + " ".join(args._argv) + ("" if args.resume else " --resume"))
    result, out = run_to_report(recipe, args.preset, out, progress=not args.quiet, device=_device(args.device),
                                command=args._command, force=args.force, resume=args.resume)
    print(summary_text(result, out))
    return 0


def _cmd_recipes(args) -> int:
    from .experiments import list_recipes, load_recipe

    for name in list_recipes():
        r = load_recipe(name)
        print(f"{name:16s} {r['title']}  (presets: {', '.join(r.get('presets', {}))})")
    return 0


def _cmd_bound(args) -> int:
    import torch

    from .encoders import SplitCNN, random_linear, skewed_linear
    from .experiments import compute_bounds, make_prior
    from .io import write_json_atomic
    from .report.html import fmt

    from .checks import check_fits, check_positive_int
    from .experiments.bound import choose_path

    size = args.size or (28 if args.encoder in ("splitcnn", "resnet18") else 8)
    check_positive_int(size, "--size")
    check_positive_int(args.m, "--m")
    check_positive_int(args.k, "--k")
    channels = args.channels if args.data == "gaussian" else 1
    d = channels * size * size
    if args.encoder in ("linear", "skewed") and not args.encoder_file:
        m = args.m if args.encoder == "linear" else d
        check_fits(8.0 * m * d, f"a linear W of {m}×{d}", "lower --m or --size")
        choose_path(d, 0, "dense")  # WᵀW is exact and dense
    else:
        choose_path(d, args.k * args.m, args.path)
    tag = f"{args.data}-{'file' if args.encoder_file else args.encoder}-m{args.m}-size{size}"
    out = _claim(args, Path(args.out) if args.out else Path("runs") / "bound" / (_param_name(
        tag, args, ("data", "encoder", "encoder_file", "m", "alpha", "split", "sigma", "tau", "k", "size", "sigma_s",
                    "score_samples", "seed", "channels", "path")) + ".json"))
    prior = (make_prior(args.data, size, sigma_s=args.sigma_s) if args.data == "digits"
             else make_prior(args.data, size, channels=channels))[0]
    if args.encoder_file:
        from .encoders import load_encoder
        enc = load_encoder(args.encoder_file).to(_device(args.device))
        if enc.in_dim != d:
            from .errors import ShapeError
            raise ShapeError(f"{args.encoder_file} takes d={enc.in_dim}; pass --size {enc.in_shape[-1]}.")
        args.encoder = "splitcnn"
    elif args.encoder == "linear":
        enc = random_linear(d, args.m, seed=args.seed)
    elif args.encoder == "skewed":
        enc = skewed_linear(d, args.alpha, seed=args.seed)
    elif args.encoder == "resnet18":
        from .encoders import SplitResNet18
        enc = SplitResNet18(args.split, args.m, (channels, size, size), seed=args.seed,
                            stem="imagenet" if size >= 64 else "cifar").to(_device(args.device))
    else:
        enc = SplitCNN(args.split, args.m, (1, size, size), seed=args.seed).to(_device(args.device))
    report = compute_bounds(enc, prior, args.sigma, tau=args.tau, k=args.k, score_samples=args.score_samples,
                            seed=args.seed, device=_device(args.device) if args.encoder in ("splitcnn", "resnet18")
                            else None, progress=not args.quiet, path=args.path)
    write_json_atomic(out, report)
    f = report.fisher
    print(f"{args.encoder} encoder on {prior.name}: d = {report.d}, m = {report.m}, rank E[G] = {report.rows[0].rank}, "
          f"E[G] {'exact' if f.exact else f'from k = {f.k} samples ({f.method})'}, τ = {report.settings['tau']:g}")
    print(f"path: {report.settings['path']}")
    print(f"{'sigma':>8}  {'bound':>22}  {'Maeng (Thm 1)':>13}  {'ceiling':>10}  {'RTC':>8}")
    for r in report.rows:
        print(f"{r.sigma:>8g}  {fmt(r.bound) + ' (' + ('Cor 1' if r.sigma > 0 else 'Cor 2') + ')':>22}  "
              f"{fmt(r.maeng):>13}  {fmt(r.ceiling):>10}  {fmt(r.rtc):>8}")
    print(f"bounds on E‖x̂ − x‖²/d; JSON: {out}")
    del torch
    return 0


def _labelled_data(name: str, size: int | None, root: str | None):
    from .data import load_cifar10, load_digits, load_mnist
    from .errors import ParameterError

    if name == "digits":
        return load_digits(size)
    if root is None:
        raise ParameterError(f"--data {name} needs --root, the local folder holding its files.")
    return (load_mnist if name == "mnist" else load_cifar10)(root, "train")


def _cmd_score_train(args) -> int:
    import torch

    from .bounds import score_matrix, score_quality
    from .data import smoothed_empirical_prior
    from .io import write_json_atomic
    from .report.plots import plot_score_quality
    from .train import train_score_model

    data = _labelled_data(args.data, args.size, args.root)
    out = _claim(args, args.out or f"runs/score/{data.name}-sigma{args.sigma_s:g}.pt")
    _claim(args, out.with_suffix(".json"))
    _claim(args, out.with_suffix(".png"))
    model, fit_result = train_score_model(data, args.sigma_s, epochs=args.epochs, width=args.width, depth=args.depth,
                                          seed=args.seed, device=_device(args.device), progress=not args.quiet)
    model.cpu().save(out)
    samples = smoothed_empirical_prior(data, args.sigma_s).sample(args.n, generator=torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        q = score_quality(score_matrix(model.score, samples.float()), samples)
    write_json_atomic(out.with_suffix(".json"), {"score_model": str(out), "fit": fit_result, "quality": q})
    plot_score_quality({f"score model ({data.name})": q}, out.with_suffix(".png"))
    print(f"score model: {out}  (final denoising loss {fit_result.history[-1]['train_loss']:.4g})")
    print(f"quality: {q.summary()}; plot {out.with_suffix('.png')}")
    return 0


def _cmd_score_check(args) -> int:
    import torch

    from .bounds import ddpm_score, score_matrix, score_quality
    from .data import smoothed_empirical_prior
    from .io import write_json_atomic
    from .report.plots import plot_score_quality

    data = _labelled_data(args.data, args.size, args.root)
    prior = smoothed_empirical_prior(data, args.sigma_s)
    out = _claim(args, args.out or f"runs/score/quality-{data.name}.png")
    _claim(args, out.with_suffix(".json"))
    samples = prior.sample(args.n, generator=torch.Generator().manual_seed(args.seed))
    qualities = {}
    if args.model:
        from .nn.score import ScoreModel
        model = ScoreModel.load(args.model)
        with torch.no_grad():
            qualities["score model"] = score_quality(score_matrix(model.score, samples.float()), samples)
    if args.ddpm:
        from .nn.ddpm import load_ddpm
        unet, sched = load_ddpm(args.ddpm)
        fn = ddpm_score(unet.to(_device(args.device)), sched, args.sigma_s, in_shape=data.shape)
        qualities[f"DDPM (t={fn.timestep})"] = score_quality(score_matrix(fn, samples), samples)
    if args.exact or not qualities:
        qualities["exact smoothed-empirical"] = score_quality(score_matrix(prior, samples), samples)
    plot_score_quality(qualities, out)
    write_json_atomic(out.with_suffix(".json"), qualities)
    for name, q in qualities.items():
        print(f"{name:28s} {q.summary()}")
    print(f"plot: {out}")
    return 0


def _cmd_train_encoder(args) -> int:
    import torch
    from torch import nn

    from .encoders import SplitCNN, SplitResNet18, save_encoder
    from .io import write_json_atomic
    from .train import fit

    data = _labelled_data(args.data, args.size, args.root)
    out = _claim(args, args.out or f"runs/encoders/{data.name}-{args.encoder}-{args.split}-m{args.m}.pt")
    _claim(args, out.with_suffix(".json"))
    if args.encoder == "splitcnn":
        enc = SplitCNN(args.split, args.m, data.shape, seed=args.seed)
    else:
        enc = SplitResNet18(args.split, args.m, data.shape, seed=args.seed, weights=args.weights)
    perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(args.seed))
    cut = int(0.9 * len(data))
    model = nn.Sequential(enc, enc.downstream())
    result = fit(model, data.subset(perm[:cut]), data.subset(perm[cut:]), epochs=args.epochs, lr=args.lr,
                 batch_size=args.batch_size, seed=args.seed, device=_device(args.device), progress=not args.quiet)
    save_encoder(enc.cpu(), out)
    write_json_atomic(out.with_suffix(".json"), {"encoder": str(out), "fit": result})
    print(f"encoder: {out}  best epoch {result.best_epoch}: validation accuracy {result.best_val_acc:.3f}, "
          f"loss {result.best_val_loss:.4g}")
    return 0


# flag → (constructor argument, the defenses it applies to)
_DEFENSE_FLAGS = {
    "lam": ("lam", ("atat",)), "steps": ("steps", ("atat", "at")), "eps": ("eps", ("atat", "at")),
    "step_size": ("step_size", ("atat", "at")), "atat_preset": ("preset", ("atat",)),
    "acc_window": ("acc_window", ("atat",)), "beta": ("beta", ("mid", "trapmid", "trapmid-star")),
    "bottleneck": ("bottleneck", ("mid",)), "lambda_x": ("lambda_x", ("bido",)), "lambda_y": ("lambda_y", ("bido",)),
    "frozen": ("frozen", ("tldmi", "tldmi-5")), "pretrained": ("pretrained", ("tldmi", "tldmi-5")),
    "alpha": ("alpha", ("negls", "trapmid", "trapmid-star")), "scale": ("scale", ("rolss", "rolss-ssf")),
    "lam1": ("lam1", ("unseen-pixels",)), "lam2": ("lam2", ("unseen-pixels",)), "rho": ("rho", ("unseen-pixels",)),
    "mask_epochs": ("mask_epochs", ("unseen-pixels",)), "mask_speed": ("mask_speed", ("unseen-pixels",)),
}


def _defense_options(args) -> dict:
    from .errors import ParameterError

    options = {}
    for flag, (key, applies) in _DEFENSE_FLAGS.items():
        value = getattr(args, flag)
        if value is None:
            continue
        if args.defense not in applies:
            shown = "lambda" if flag == "lam" else flag.replace("_", "-")
            raise ParameterError(f"--{shown} does not apply to --defense {args.defense} "
                                 f"(it is for {', '.join(applies)}).")
        options[key] = tuple(value) if isinstance(value, list) else value
    return options


def _cmd_train(args) -> int:
    from .classifiers import save_classifier
    from .experiments.mia import load_split, pretrain_public, train_defended
    from .io import atomic_directory, write_json_atomic

    options = _defense_options(args)
    split = load_split({"dataset": args.data, "root": args.root, "public_root": args.public_root,
                        "size": args.size or (16 if args.data == "digits" else 224), "split_seed": 0})
    out = _claim(args, args.out or f"runs/train/{split.train.name}-{args.model}-{args.defense}-seed{args.seed}", "dir")
    checkpoint = out.parent / f".{out.name}.checkpoint.pt"
    if checkpoint.exists() and not args.resume:
        checkpoint.unlink()  # a fresh run; --resume continues from it instead
    elif args.resume and not checkpoint.exists():
        print(f"reconguard: no checkpoint for {out} yet; starting from epoch 0", file=sys.stderr)
    args._interrupted_hint = f"resume with: reconguard {' '.join(args._argv)}" + ("" if args.resume else " --resume")
    public_state = None
    if args.defense in ("tldmi", "tldmi-5") and "pretrained" not in options:
        public_state = pretrain_public(split, args.model, args.width, args.epochs, args.seed, _device(args.device))
    fit_options = {"batch_size": args.batch_size, "progress": not args.quiet}
    if args.defense != "dpsgd":
        fit_options["checkpoint"] = checkpoint
    if args.milestones:
        fit_options["milestones"] = args.milestones
    if args.gamma is not None:
        fit_options["gamma"] = args.gamma
    model, row, defense = train_defended(split, args.defense, options, arch=args.model, width=args.width,
                                         epochs=args.epochs, lr=args.lr, seed=args.seed, fit_options=fit_options,
                                         public_state=public_state, device=_device(args.device))
    structure = {}
    if args.defense == "mid":
        structure = {"bottleneck": defense.bottleneck, "head": defense.head}
    elif args.defense in ("rolss", "rolss-ssf"):
        structure = {"scale": defense.scale, "stage": defense.stage}
    spec = {"arch": args.model, "num_classes": split.num_classes, "in_shape": list(split.train.shape),
            "width": args.width, "defense": args.defense, "structure": structure, "options": {
                k: (str(v) if k == "pretrained" else v) for k, v in options.items()}, "seed": args.seed,
            "data": args.data, "size": split.train.shape[-1]}
    inner = model[1] if args.defense == "unseen-pixels" else model
    with atomic_directory(out, args._command, force=args.force) as tmp:
        save_classifier(tmp / "model.pt", inner.cpu(), spec, getattr(defense, "mask", None))
        write_json_atomic(tmp / "result.json", {"spec": spec, "result": row})
    checkpoint.unlink(missing_ok=True)
    extras = "".join(f", {k} {v}" for k, v in row.extras.items() if not isinstance(v, list))
    print(f"{args.defense} on {split.summary()}:")
    print(f"  test accuracy {row.test_acc:.3f}, train {row.train_acc:.3f}, validation {row.val_acc:.3f} "
          f"(epoch {row.best_epoch} of {row.epochs}), {row.seconds:.0f} s{extras}")
    print(f"  model: {out / 'model.pt'}")
    return 0


def _cmd_evaluate(args) -> int:
    from .classifiers import load_classifier
    from .experiments.mia import DefenseRow, accuracy, load_split
    from .experiments.mia_eval import Evaluator
    from .io import write_json_atomic

    out = _claim(args, args.out or "runs/evaluate/results.json")
    loaded = [(path, *load_classifier(path)) for path in args.models]
    first = loaded[0][2]
    split = load_split({"dataset": first.get("data", "digits"), "root": args.root, "public_root": args.public_root,
                        "size": first.get("size", 16)})
    from .checks import check_fits, check_positive_int

    check_positive_int(args.candidates, "--candidates")
    d = 1
    for v in first.get("in_shape", [1, 16, 16]):
        d *= int(v)
    # candidate images (and their generator activations, ~4×) per class, float32
    check_fits(4.0 * args.candidates * d * 4 * split.num_classes, f"--candidates {args.candidates}",
               "lower --candidates")
    keep = args.keep or min(20, args.candidates)
    p = {"attack": {"candidates": args.candidates, "keep": keep, "steps": args.steps, "finals": min(args.finals, keep),
                    "space": args.space, "loss": args.loss, "generator_epochs": args.generator_epochs,
                    "baseline": args.baseline},
         "robustness": {"eps": args.eps, "n": args.n, "steps": args.robust_steps, "n_queries": args.n_queries}
         if args.eps else None, "eval_epochs": args.eval_epochs}
    device = _device(args.device)
    evaluator = Evaluator(split, p, device=device, progress=not args.quiet)
    rows = []
    from tqdm.auto import tqdm
    for path, model, spec in tqdm(loaded, desc="evaluate", unit="model", disable=args.quiet or len(loaded) < 2):
        model = model.to(device)
        row = DefenseRow(spec.get("defense", "nodef"), spec.get("label", spec.get("defense", "nodef")),
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


def _cmd_analyze(args) -> int:
    import json

    from .errors import CorruptDataError, DataFileNotFoundError
    from .experiments.mia import DefenseRow
    from .experiments.mia_eval import analyse
    from .io import write_json_atomic

    out = _claim(args, args.out or "runs/analyze/analysis.json")
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
    analysis = analyse(rows, {})
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
    write_json_atomic(out, analysis)
    print(f"analysis: {out}")
    return 0


def _cmd_prepare_public(args) -> int:
    from .data import prepare_public

    _claim(args, args.out, "dir")
    store = prepare_public(args.out, args.folder, size=args.size, channels=args.channels, crop=args.crop,
                           patches_per_image=args.per_image, min_keypoints=args.min_keypoints, seed=args.seed,
                           progress=not args.quiet)
    print(f"{len(store)} patches of shape {store.shape} with > {args.min_keypoints} SIFT keypoints → {store.folder}")
    return 0


def _cmd_instahide_train(args) -> int:
    from .experiments.instahide import public_pool, run_accuracy
    from .io import write_json_atomic
    from .report.accuracy import accuracy_summary
    from .experiments.instahide import AccuracyResult

    data = _labelled_data(args.data, args.size, args.root)
    out = _claim(args, args.out or _param_name(f"runs/instahide/{data.name}-{args.method}-{args.mode}-k{args.k}", args,
                                               ("epochs", "T", "own_floor", "epsilon", "public", "seed")) + ".json")
    spec = {"method": args.method, "k": args.k, "mode": args.mode}
    rows, n_train, n_test = run_accuracy(data, [spec], epochs=args.epochs, T=args.T, own_floor=args.own_floor,
                                         public=public_pool(args.public, data.shape) if args.mode == "cross" else None,
                                         dp={"target_epsilon": args.epsilon}, seed=args.seed,
                                         device=_device(args.device))
    settings = {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "func"}
    result = AccuracyResult("instahide-train", "cli", f"{args.method} on {data.name}", settings,
                            rows, rows[0].seconds, data.name, n_train, n_test)
    write_json_atomic(out, result)
    print(accuracy_summary(result))
    print(f"  JSON: {out}")
    return 0


def _cmd_challenge(args) -> int:
    from .attacks.instahide import make_challenge
    from .encoders import InstaHide
    from .encoders.instahide import paper_c1
    from .experiments.instahide import public_pool

    from .io import mark_folder

    data = _labelled_data(args.data, args.size, args.root)
    out = _claim(args, args.out or "runs/challenge", "dir")
    truth = _claim(args, args.truth or f"{out}-truth", "dir")
    if out.resolve() == truth.resolve():
        from .errors import ParameterError
        raise ParameterError("--truth must be another folder than --out: the ground truth is kept apart.")
    pub = public_pool(args.public, data.shape) if args.mode == "cross" else None
    scheme = InstaHide(args.k, c1=paper_c1(args.k), mode=args.mode, public=pub,
                       num_classes=int(data.labels.max()) + 1)
    make_challenge(scheme, data.images, data.labels, args.n, args.T, out, truth, seed=args.seed)
    for folder in (out, truth):
        mark_folder(folder, args._command)
    print(f"{args.n}×{args.T} encryptions (k={args.k}, {args.mode}) → {out}/encryptions.npy, labels.npy; "
          f"ground truth → {truth}/ (keep it apart)")
    return 0


def _cmd_public_search(args) -> int:
    """Section 5.3's search for the public sources of randomly cropped patches in cross-dataset encryptions."""
    from .experiments.instahide_attacks import run_public_search

    rows = run_public_search(k=args.k, size=args.size, source_size=args.source_size, n_sources=args.sources,
                             queries=args.queries, scorers=args.scorers.split(","), steps=args.steps, seed=args.seed,
                             progress=not args.quiet)
    print(f"public-source search, InstaHide cross k={args.k}, {args.size}×{args.size} crops of "
          f"{args.source_size}×{args.source_size} sources, N={args.sources}, {args.queries} encryptions")
    print(f"{'scorer':14s} {'top-m':>6s} {'hit rate':>9s} {'chance':>7s}")
    for r in rows:
        print(f"{r.scorer:14s} {r.m:6d} {r.hit_rate:9.3f} {r.chance:7.3f}")
    return 0


def _cmd_score(args) -> int:
    import numpy as np

    from .attacks.instahide import score_challenge
    from .errors import DataFileNotFoundError

    from .checks import load_array

    recovered = load_array(args.recovered, "recovered images (an N×C×H×W .npy in [0, 1])", ndim=(3, 4))
    s = score_challenge(recovered, args.truth)
    print(f"{s.summary()} ({s.n_recovered} recovered images)")
    return 0


def _cmd_instahide_attack(args) -> int:
    """Attack a challenge folder written by `instahide challenge` (encryptions.npy, labels.npy)."""
    import numpy as np
    import torch

    from .attacks.instahide import AveragingAttack, CarliniAttack, Demasker, ks_test, score_challenge
    from .encoders import InstaHide
    from .errors import DataFileNotFoundError, ParameterError, ShapeError

    from .attacks.instahide.measure import read_challenge_info
    from .checks import load_array

    folder = Path(args.challenge)
    hint = "(write a challenge with `reconguard instahide challenge`)"
    if not (folder / "encryptions.npy").is_file():
        raise DataFileNotFoundError(f"{folder / 'encryptions.npy'} does not exist {hint}.")
    enc = load_array(folder / "encryptions.npy", "encryptions", ndim=(4,)).float()
    labels = load_array(folder / "labels.npy", "labels (soft labels, one row per encryption)", ndim=(2,)).float()
    if labels.shape[0] != enc.shape[0]:
        raise ShapeError(f"{folder}: {enc.shape[0]} encryptions but {labels.shape[0]} label rows {hint}.")
    info = read_challenge_info(folder)
    if info is not None:  # the challenge says what it is: a different --k / --mode / --n is a mistake
        for key, given in (("k", args.k), ("mode", args.mode), ("n", args.n)):
            if given is None:
                setattr(args, key, info.get(key))
            elif info.get(key) is not None and given != info[key]:
                raise ParameterError(f"--{key} {given} but {folder}/challenge.json says {key} = {info[key]}; "
                                     f"drop --{key} (it is read from the challenge) or give {info[key]}.")
    if args.k is None:
        args.k = 4
    if args.mode is None:
        args.mode = "inside"
    public = _labelled_data(args.public, enc.shape[-1] if args.public == "digits" else None, args.public_root).images
    stats = InstaHide(args.k).channel_stats(public)
    out = None
    if args.method != "ks":
        out = _claim(args, args.out or folder.parent / (_param_name(
            f"{folder.name}-{args.method}-k{args.k}-{args.mode}", args,
            ("n", "restarts", "label_free", "similarity_steps", "m", "demask", "pool", "public", "seed")) + ".npy"))
    if args.method == "ks":
        if not args.truth:
            raise ParameterError("the KS test groups encryptions by their private image: give --truth DIR.")
        owner = load_array(Path(args.truth) / "assignment.npy", "the truth's assignment", ndim=(1,)).long()
        if owner.shape[0] != enc.shape[0]:
            raise ShapeError(f"{args.truth}/assignment.npy has {owner.shape[0]} entries for {enc.shape[0]} encryptions.")
        T = int(torch.bincount(owner).min())
        grouped = torch.stack([enc[owner == i][:T] for i in owner.unique()])
        r = ks_test(grouped)
        print(f"KS statistic, one image's encryptions vs all: {r.statistic_all:.3f} (p {r.pvalue_all:.3g}); "
              f"vs the others': {r.statistic_other:.3f} (p {r.pvalue_other:.3g})  [{r.n_images} images × {r.n_encryptions}]")
        return 0
    if args.method == "carlini":
        if args.n is None:
            raise ParameterError("carlini needs --n, the number of private images in the challenge.")
        from .encoders.instahide import paper_c1
        from .experiments.instahide import public_pool

        pool = public_pool(args.pool, tuple(enc.shape[1:])) if args.mode == "cross" else None
        noise = None
        if pool is not None:
            noise = pool.get(torch.arange(min(len(pool), 2000))) if hasattr(pool, "get") else pool[:2000]
        similarity = None
        if args.similarity_steps:
            from .attacks.instahide import SimilarityNetwork
            scheme = InstaHide(args.k, c1=paper_c1(args.k), mode=args.mode, public=pool)
            net = SimilarityNetwork(enc.shape[1], steps=args.similarity_steps, seed=args.seed, progress=not args.quiet)
            net.fit(scheme, public)
            similarity = net.scores(enc)
        r = CarliniAttack(args.k, args.n, restarts=args.restarts, c1=paper_c1(args.k), mode=args.mode,
                          seed=args.seed, progress=not args.quiet).run(
            enc, None if args.label_free else labels, public, noise_images=noise, similarity=similarity)
        images = r.images
        how = "label-free grid assignment" if args.label_free else "label-constrained assignment"
        print(f"Carlini et al. (lifting + {how}, {args.mode}): {len(images)} images in {r.seconds:.1f} s, "
              f"residual {r.residual:.4g}")
    else:
        e = enc
        if args.demask:
            mixes = InstaHide(args.k).encrypt(public, seed=args.seed, stats=stats)
            dm = Demasker(e.shape[1], seed=args.seed)
            dm.fit(mixes.images * mixes.key.mask)
            e = dm.run(e).demasked
        lam = float(labels.max(1).values.mean()) if labels.ndim == 2 else None
        r = AveragingAttack(strong=False, m=args.m, own_coefficient=lam).run(e, k=args.k)
        mean = torch.tensor(stats[0]).reshape(1, -1, 1, 1)
        std = torch.tensor(stats[1]).reshape(1, -1, 1, 1)
        images = (r.estimates.float() * std + mean).clamp(0, 1)
        print(f"weak averaging{' after demasking' if args.demask else ''} (top-{args.m}): {len(images)} estimates")
    from .io import atomic_file
    with atomic_file(out) as tmp, open(tmp, "wb") as fh:
        np.save(fh, images.numpy())
    print(f"recovered images → {out}")
    if args.truth:
        print(score_challenge(images, args.truth).summary())
    return 0


def _cmd_gradient_matching(args) -> int:
    from .attacks.gradients import GradientMatching, model_gradients
    from .encoders import InstaHide
    from .encoders.instahide import paper_c1
    from .io import write_json_atomic
    from .metrics import ssim
    from .nn import mnist_cnn, seeded

    data = _labelled_data(args.data, args.size, args.root)
    if not 0 <= args.index < len(data):
        from .errors import ParameterError
        raise ParameterError(f"--index must be in [0, {len(data)}), got {args.index}.")
    out = _claim(args, args.out or _param_name(f"runs/attacks/gradient-matching-{data.name}-i{args.index}"
                                               f"-instahide{args.instahide_k}", args,
                                               ("steps", "distance", "unknown_label", "seed")) + ".json")
    with seeded(args.seed):
        model = mnist_cnn(data.shape, int(data.labels.max()) + 1)
    x, y = data.images[args.index:args.index + 1], data.labels[args.index:args.index + 1]
    target_x, target_y = x, y
    if args.instahide_k:
        enc = InstaHide(args.instahide_k, c1=paper_c1(args.instahide_k)).encrypt(data.images, data.labels)
        target_x, target_y = enc.images[args.index:args.index + 1], enc.labels[args.index:args.index + 1]
    grads = model_gradients(model, target_x, target_y)
    r = GradientMatching(model, steps=args.steps, distance=args.distance).run(
        grads, data.shape, label=None if args.unknown_label else target_y, num_classes=int(data.labels.max()) + 1)
    rec = r.reconstruction
    report = {"ssim_to_private": float(ssim(rec.clamp(0, 1), x)), "mse_to_target": float(((rec - target_x) ** 2).mean()),
              "target": "InstaHide encryption" if args.instahide_k else "private image", "gradient_distance": r.final_distance}
    write_json_atomic(out, report)
    print(f"gradient matching on a {report['target']}: SSIM to the private image {report['ssim_to_private']:.3f}, "
          f"MSE to the gradient's input {report['mse_to_target']:.3g}; JSON: {out}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with reconguard's one-line errors: ``reconguard: error: …`` and exit 2."""

    def error(self, message):
        sys.stderr.write(f"reconguard: error: {self.prog}: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    from .experiments import PRESETS

    p = _Parser(prog="reconguard", description="How much of a private image can an attacker reconstruct?")
    p.add_argument("--version", action="version", version=f"reconguard {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def add_run_opts(sp, default_preset="cpu"):
        sp.add_argument("--preset", choices=PRESETS, default=default_preset,
                        help="smoke (seconds), cpu (minutes on 2 cores), paper (the paper's sizes; GPU)")
        sp.add_argument("--out", help="output folder: new, or an earlier run of the same recipe (replaced whole when "
                        "the run succeeds); default runs/<recipe>")
        sp.add_argument("--quiet", action="store_true", help="no progress bars")
        sp.add_argument("--device", default="auto", help="auto (CUDA when present) | cpu | cuda")
        sp.add_argument("--resume", action="store_true", help="continue an interrupted run: its finished units "
                        "(a sweep's encoders, the mia recipes' models) are loaded, not recomputed")

    sp = sub.add_parser("demo", help="the main job: Figure-2 sweep on Gaussian and digits priors → runs/demo/")
    add_run_opts(sp)
    sp.set_defaults(func=lambda a: _cmd_run(a, "fig2-linear"), name="demo")

    sp = sub.add_parser("run", help="run a recipe (built-in name or YAML path) and write its report")
    sp.add_argument("recipe")
    add_run_opts(sp)
    sp.set_defaults(func=lambda a: _cmd_run(a, a.recipe), name=None)

    sp = sub.add_parser("recipes", help="list the built-in recipes")
    sp.set_defaults(func=_cmd_recipes)

    sp = sub.add_parser("bound", help="every MSE bound for one encoder on one prior")
    sp.add_argument("--data", choices=["gaussian", "digits"], default="gaussian")
    sp.add_argument("--encoder", choices=["linear", "skewed", "splitcnn", "resnet18"], default="linear")
    sp.add_argument("--channels", type=int, choices=[1, 3], default=1, help="channels of the Gaussian prior's images "
                    "(3 for RGB encoders such as resnet18)")
    sp.add_argument("--path", choices=["auto", "dense", "lowrank"], default="auto",
                    help="dense: d×d E[G] and S; lowrank: E[G] as the Gram of its k·m Jacobian rows with an exactly "
                    "isotropic S (Gaussian prior), for inputs as large as 3×224×224; auto: dense when it fits")
    sp.add_argument("--encoder-file", help="a `reconguard train-encoder` file (replaces --encoder/--m/--split)")
    sp.add_argument("--m", type=int, default=32, help="embedding size (linear, splitcnn)")
    sp.add_argument("--alpha", type=float, default=1.0, help="eigenvalue skew (skewed)")
    sp.add_argument("--split", choices=["early", "middle", "late"], default="middle",
                    help="split point (splitcnn, resnet18)")
    sp.add_argument("--sigma", type=float, nargs="+", default=[0.0, 1e-3], help="encoder noise std(s)")
    sp.add_argument("--tau", type=float, default=None,
                    help="null-space threshold (fraction of λ_max); default 0 for exact E[G], else 1e-4")
    sp.add_argument("--k", type=int, default=256, help="inputs averaged to estimate E[G] (splitcnn)")
    sp.add_argument("--size", type=int, default=None, help="image side (d = size²); default 8, 28 for splitcnn")
    sp.add_argument("--sigma-s", type=float, default=0.1, help="smoothing noise of the digits prior")
    sp.add_argument("--score-samples", type=int, default=20000, help="samples averaged for S (digits)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="auto", help="auto | cpu | cuda")
    sp.add_argument("--out", help="JSON path (default runs/bound/<data>-<encoder>-m<m>.json)")
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_bound)

    def add_data_opts(sp, default_size=None):
        sp.add_argument("--data", choices=["digits", "mnist", "cifar10"], default="digits")
        sp.add_argument("--root", help="local folder with the MNIST IDX files / CIFAR-10 batches")
        sp.add_argument("--size", type=int, default=default_size, help="digits image side (default 8)")
        sp.add_argument("--seed", type=int, default=0)
        sp.add_argument("--device", default="auto")
        sp.add_argument("--out")
        sp.add_argument("--quiet", action="store_true")

    score = sub.add_parser("score", help="score models: train one, or check a score's S (Figure 7)")
    ssub = score.add_subparsers(dest="score_command", required=True)
    sp = ssub.add_parser("train", help="fit a denoising score model at smoothing σ_s and save it")
    add_data_opts(sp)
    sp.add_argument("--sigma-s", type=float, default=0.1)
    sp.add_argument("--epochs", type=int, default=30)
    sp.add_argument("--width", type=int, default=64)
    sp.add_argument("--depth", type=int, default=6)
    sp.add_argument("--n", type=int, default=20000, help="samples for the quality check")
    sp.set_defaults(func=_cmd_score_train)
    sp = ssub.add_parser("check", help="score_quality of a score model, a DDPM and/or the exact prior")
    add_data_opts(sp)
    sp.add_argument("--sigma-s", type=float, default=0.1)
    sp.add_argument("--model", help="a `reconguard score train` file")
    sp.add_argument("--ddpm", help="a local diffusers DDPM folder")
    sp.add_argument("--exact", action="store_true", help="also the exact smoothed-empirical prior")
    sp.add_argument("--n", type=int, default=20000)
    sp.set_defaults(func=_cmd_score_check)

    sp = sub.add_parser("train-encoder", help="train a split encoder with its downstream model on the task")
    add_data_opts(sp)
    sp.add_argument("--encoder", choices=["splitcnn", "resnet18"], default="splitcnn")
    sp.add_argument("--split", choices=["early", "middle", "late"], default="middle")
    sp.add_argument("--m", type=int, default=32)
    sp.add_argument("--weights", help="resnet18: a local torchvision-format state dict to start from")
    sp.add_argument("--epochs", type=int, default=10)
    sp.add_argument("--lr", type=float, default=1e-3)
    sp.add_argument("--batch-size", type=int, default=128)
    sp.set_defaults(func=_cmd_train_encoder)

    ih = sub.add_parser("instahide", help="InstaHide: public patch pool, training with InstaHide or a baseline")
    isub = ih.add_subparsers(dest="instahide_command", required=True)
    sp = isub.add_parser("prepare-public", help="cut SIFT-filtered patches from a folder of public images")
    sp.add_argument("folder", nargs="?", help="folder of images (default: scikit-image's shipped samples)")
    sp.add_argument("--out", required=True, help="folder for patches.npy + meta.json")
    sp.add_argument("--size", type=int, default=32, help="patch side after resizing (= the private images')")
    sp.add_argument("--channels", type=int, choices=[1, 3], default=3)
    sp.add_argument("--crop", type=int, default=96, help="side of the crop SIFT keypoints are counted on")
    sp.add_argument("--per-image", type=int, default=200, help="random crops tried per image")
    sp.add_argument("--min-keypoints", type=int, default=40)
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_prepare_public)
    sp = isub.add_parser("train", help="train a classifier with InstaHide (or a baseline) and report test accuracy")
    add_data_opts(sp)
    sp.add_argument("--method", choices=["instahide", "mixup", "vanilla", "dpsgd"], default="instahide")
    sp.add_argument("--k", type=int, default=4)
    sp.add_argument("--mode", choices=["inside", "cross"], default="inside")
    sp.add_argument("--public", default="samples", help="cross mode: a prepare-public folder, or 'samples'")
    sp.add_argument("--epochs", type=int, default=40)
    sp.add_argument("--T", type=int, default=10, help="encryptions averaged at inference")
    sp.add_argument("--own-floor", type=float, default=0.5, help="test-time floor on the image's own coefficient")
    sp.add_argument("--epsilon", type=float, default=8.0, help="DP-SGD target ε")
    sp.set_defaults(func=_cmd_instahide_train)
    sp = isub.add_parser("challenge", help="write a challenge set: n private images × T encryptions, truth apart")
    add_data_opts(sp)
    sp.add_argument("--n", type=int, default=100)
    sp.add_argument("--T", type=int, default=50)
    sp.add_argument("--k", type=int, default=6)
    sp.add_argument("--mode", choices=["inside", "cross"], default="inside")
    sp.add_argument("--public", default="samples")
    sp.add_argument("--truth", help="folder for the ground truth (default: <out>-truth)")
    sp.set_defaults(func=_cmd_challenge)
    sp = isub.add_parser("attack", help="attack a challenge: carlini (lifting), averaging (weak, optional demasking), ks")
    sp.add_argument("method", choices=["carlini", "averaging", "ks"])
    sp.add_argument("--challenge", required=True, help="folder with encryptions.npy and labels.npy")
    sp.add_argument("--truth", help="the challenge's truth folder: score the recovery (ks: group by image)")
    sp.add_argument("--k", type=int, default=None, help="images per mix (default: the challenge's challenge.json, else 4)")
    sp.add_argument("--n", type=int, help="carlini: the number of private images (default: from challenge.json)")
    sp.add_argument("--restarts", type=int, default=4, help="carlini: random restarts of the assignment")
    sp.add_argument("--mode", choices=["inside", "cross"], default=None,
                    help="carlini: the challenge's InstaHide mode (cross: public images in every mix; default: from "
                    "challenge.json, else inside)")
    sp.add_argument("--pool", default="samples", help="carlini, cross mode: the public pool's kind (noise model; "
                    "'samples' or a PatchStore folder)")
    sp.add_argument("--label-free", action="store_true", help="carlini: ignore the released labels (coefficients "
                    "searched on a grid)")
    sp.add_argument("--similarity-steps", type=int, default=0, help="carlini: train the pair-similarity network for "
                    "this many steps on the attacker's own encryptions and start one restart from its clustering")
    sp.add_argument("--m", type=int, default=5, help="averaging: neighbours averaged")
    sp.add_argument("--demask", action="store_true", help="averaging: undo the sign mask with a demasking network first")
    sp.add_argument("--public", choices=["digits", "mnist", "cifar10"], default="digits",
                    help="the attacker's own data of the same kind (signs, statistics, demasker training)")
    sp.add_argument("--public-root", help="folder of --public mnist / cifar10")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", help="recovered images .npy (default next to the challenge folder)")
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_instahide_attack)
    sp = isub.add_parser("search", help="search the public sources of randomly cropped patches (section 5.3): "
                         "centre cosine, shift-cosine, SSIM, a learned scorer")
    sp.add_argument("--k", type=int, default=6)
    sp.add_argument("--size", type=int, default=16, help="the private images' and patches' side")
    sp.add_argument("--source-size", type=int, default=20, help="the sources' side (patches are random crops)")
    sp.add_argument("--sources", type=int, default=400, help="N, the number of public sources")
    sp.add_argument("--queries", type=int, default=200, help="encryptions searched")
    sp.add_argument("--scorers", default="cosine,shift-cosine,ssim,learned")
    sp.add_argument("--steps", type=int, default=600, help="learned scorer's training steps")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_public_search)
    sp = isub.add_parser("score", help="score recovered images against a challenge's ground truth")
    sp.add_argument("--recovered", required=True, help=".npy of recovered images (N×C×H×W, [0, 1])")
    sp.add_argument("--truth", required=True, help="the challenge's truth folder")
    sp.set_defaults(func=_cmd_score)

    from .classifiers import ARCHS
    from .defenses.registry import defense_names

    sp = sub.add_parser("train", help="train a classifier with a model-inversion defense (AT-AT, MID, BiDO, …)")
    sp.add_argument("--data", choices=["digits", "folder"], default="digits",
                    help="digits: private 0–4, public 5–9 (ships with scikit-learn); folder: --root DIR/<class>/<img>")
    sp.add_argument("--root", help="private image folder (root/<identity>/<image>) for --data folder")
    sp.add_argument("--public-root", help="public image folder (other identities) for --data folder")
    sp.add_argument("--size", type=int, help="image side (default 16 for digits, 224 for folders)")
    sp.add_argument("--model", choices=ARCHS, default="resnet18")
    sp.add_argument("--width", type=int, default=16, help="ResNet base width (64 = torchvision)")
    sp.add_argument("--defense", choices=defense_names(), default="nodef")
    sp.add_argument("--epochs", type=int, default=30)
    sp.add_argument("--lr", type=float, default=1e-3)
    sp.add_argument("--batch-size", type=int, default=128)
    sp.add_argument("--milestones", type=int, nargs="*", help="MultiStepLR epochs (default: 75%% of the epochs)")
    sp.add_argument("--gamma", type=float, help="MultiStepLR decay (default 0.1)")
    sp.add_argument("--seed", type=int, default=0)
    g = sp.add_argument_group("AT-AT / adversarial training (ε and steps in pixel [0, 1] units)")
    g.add_argument("--lambda", dest="lam", type=float, help="AT-AT weight λ of CE(x + δ, y′)")
    g.add_argument("--steps", type=int, help="PGD steps")
    g.add_argument("--eps", type=float, help="L∞ radius")
    g.add_argument("--step-size", type=float, help="PGD step")
    g.add_argument("--atat-preset", help="a Table 6 row (facescrub-rn152, …) or digits")
    g.add_argument("--acc-window", type=float, nargs=2, metavar=("LO", "HI"),
                   help="keep the latest epoch whose validation accuracy is in [LO, HI] (appendix B)")
    g = sp.add_argument_group("other defenses")
    g.add_argument("--beta", type=float, help="MID: KL weight β; Trap-MID: trapdoor loss weight β")
    g.add_argument("--bottleneck", type=int, help="MID: bottleneck size k")
    g.add_argument("--lambda-x", type=float, help="BiDO: weight of HSIC(X, Z)")
    g.add_argument("--lambda-y", type=float, help="BiDO: weight of HSIC(Z, Y)")
    g.add_argument("--frozen", type=int, help="TL-DMI: number of first layers frozen")
    g.add_argument("--pretrained", help="TL-DMI: public-data weights (state dict file); default: pre-train on the public split")
    g.add_argument("--alpha", type=float, help="NegLS: final (negative) smoothing; Trap-MID: trigger blend α")
    g.add_argument("--scale", type=float, help="RoLSS: last-stage skip factor (0 removes, 0.2 = SSF)")
    g.add_argument("--lam1", type=float, help="Unseen-Pixels: ridge weight")
    g.add_argument("--lam2", type=float, help="Unseen-Pixels: adaptive group-lasso weight")
    g.add_argument("--rho", type=float, help="Unseen-Pixels: ρ")
    g.add_argument("--mask-epochs", type=int, help="Unseen-Pixels: epochs of each mask stage")
    g.add_argument("--mask-speed", type=float, help="Unseen-Pixels: mask step multiplier")
    sp.add_argument("--out", help="output folder: model.pt + result.json "
                    "(default runs/train/<data>-<model>-<defense>-seed<seed>)")
    sp.add_argument("--resume", action="store_true", help="continue an interrupted run from its last checkpoint "
                    "(kept beside --out until the run completes); the final weights equal an uninterrupted run's")
    sp.add_argument("--quiet", action="store_true")
    sp.add_argument("--device", default="auto")
    sp.set_defaults(func=_cmd_train)

    sp = sub.add_parser("evaluate", help="attack trained classifiers (model inversion) and measure robust accuracy")
    sp.add_argument("models", nargs="+", help="model.pt files written by `reconguard train`")
    sp.add_argument("--root", help="private image folder, for models trained on --data folder")
    sp.add_argument("--public-root", help="public image folder (the attacker's generator trains on it)")
    sp.add_argument("--candidates", type=int, default=500)
    sp.add_argument("--keep", type=int, help="candidates kept per class for optimisation (default min(20, candidates))")
    sp.add_argument("--steps", type=int, default=60, help="latent optimisation steps")
    sp.add_argument("--finals", type=int, default=5, help="reconstructions kept per class")
    sp.add_argument("--loss", choices=["poincare", "ce"], default="poincare",
                    help="the identity loss of the latent optimisation (PPA: poincare; ce was stronger on 16×16 digits)")
    sp.add_argument("--space", choices=["intermediate", "latent"], default="intermediate",
                    help="search the generator's latent + intermediate features (default) or its latent only")
    sp.add_argument("--baseline", action="store_true", help="also run plain gradient inversion")
    sp.add_argument("--generator-epochs", type=int, default=60, help="epochs of the attacker's VAE prior on the "
                    "public data")
    sp.add_argument("--eps", type=float, nargs="*", default=[0.031, 0.0025, 0.0005, 1e-5],
                    help="robust-accuracy radii in pixel units (none: skip robustness)")
    sp.add_argument("--n", type=int, default=128, help="test images for robust accuracy")
    sp.add_argument("--robust-steps", type=int, default=10)
    sp.add_argument("--n-queries", type=int, default=100, help="Square attack queries")
    sp.add_argument("--eval-epochs", type=int, default=20, help="epochs of the evaluation classifier")
    sp.add_argument("--out", help="results JSON (default runs/evaluate/results.json)")
    sp.add_argument("--device", default="auto")
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_evaluate)

    sp = sub.add_parser("analyze", help="regressions of leakage on robustness, and the AT-AT vs NoDef experiment")
    sp.add_argument("results", nargs="+", help="results JSON files from `reconguard evaluate` or `reconguard run`")
    sp.add_argument("--out", help="analysis JSON (default runs/analyze/analysis.json)")
    sp.set_defaults(func=_cmd_analyze)

    atk = sub.add_parser("attack", help="attacks that need no recipe")
    asub = atk.add_subparsers(dest="attack_command", required=True)
    sp = asub.add_parser("gradients", help="gradient matching (DLG) on one image's gradient of a small CNN")
    add_data_opts(sp)
    sp.add_argument("--index", type=int, default=0)
    sp.add_argument("--instahide-k", type=int, default=0, help="> 0: the gradient is of an InstaHide encryption")
    sp.add_argument("--steps", type=int, default=30, help="L-BFGS outer steps")
    sp.add_argument("--distance", choices=["l2", "cosine"], default="l2")
    sp.add_argument("--unknown-label", action="store_true", help="learn the label too")
    sp.set_defaults(func=_cmd_gradient_matching)
    _finish_parser(p)
    return p


def _subparsers(p: argparse.ArgumentParser):
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in dict.fromkeys(action.choices.values()):
                yield sp
                yield from _subparsers(sp)


_HELP = {  # options many commands share, and the few left without a help of their own
    "data": "dataset: digits ships with scikit-learn; mnist / cifar10 load from --root",
    "seed": "random seed (same seed, same numbers on the CPU)",
    "quiet": "no progress bars",
    "device": "auto (CUDA when present) | cpu | cuda",
    "out": "output path (new, or an earlier result of the same command; else --force)",
    "recipe": "a built-in recipe name (`reconguard recipes`) or the path of your own YAML file",
    "encoder": "encoder family",
    "sigma_s": "smoothing noise std σ_s of the prior (pixel units)",
    "epochs": "training epochs",
    "width": "network width (channels of the first stage)",
    "depth": "number of residual blocks",
    "n": "number of samples / images",
    "split": "split point of the encoder",
    "m": "embedding size",
    "lr": "Adam learning rate",
    "batch_size": "training batch size",
    "channels": "1 (grey) or 3 (colour) patches",
    "min_keypoints": "SIFT keypoints a crop needs to be kept",
    "method": "what to run",
    "k": "images per mix",
    "mode": "inside: partners among the private images; cross: 1 private partner + k − 2 public images",
    "T": "encryptions of each private image",
    "public": "public pool for cross mode: 'samples' (scikit-image's images) or a prepare-public folder",
    "scorers": "comma-separated scorers to compare",
    "model": "classifier architecture",
    "defense": "model-inversion defense (nodef = none)",
    "candidates": "prior samples scored per class before optimisation",
    "robust_steps": "PGD steps of the robust-accuracy attacks",
    "index": "which image of the dataset to attack",
    "distance": "gradient distance: l2 (DLG) or cosine (Geiping et al.)",
}


class _DefaultsFormatter(argparse.HelpFormatter):
    """Appends "(default: …)" to every option that has a default worth showing."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _finish_parser(p: argparse.ArgumentParser) -> None:
    """Every command shows its defaults; every command that writes (--out) takes --force."""
    for sp in _subparsers(p):
        sp.formatter_class = _DefaultsFormatter
        for a in sp._actions:
            if a.help is None and a.dest in _HELP:
                a.help = _HELP[a.dest]
        options = {o for a in sp._actions for o in a.option_strings}
        if "--out" in options and "--force" not in options:
            sp.add_argument("--force", action="store_true",
                            help="write even where --out holds files reconguard did not write, or another "
                            "command's results (they are replaced)")


_SUBCOMMANDS = ("score_command", "instahide_command", "attack_command")


def _command_name(args) -> str:
    """The command a run belongs to, for output markers: ``run fig2-linear``, ``instahide attack carlini``…"""
    parts = [args.command] + [getattr(args, k) for k in _SUBCOMMANDS if getattr(args, k, None)]
    if args.command == "instahide" and getattr(args, "instahide_command", None) == "attack":
        parts.append(args.method)
    if args.command in ("run", "demo"):
        parts = ["run", Path(args.recipe).stem if args.command == "run" else "fig2-linear"]
    return " ".join(parts)


def _error(message: str, code: int = 2) -> int:
    print(f"reconguard: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one command. A user's mistake — bad input, a path in the way, a file that is not what it should
    be, a size that cannot fit — ends with one line ``reconguard: error: …`` and exit 2; Ctrl-C with exit 130."""
    import contextlib

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args._argv, args._command, args._claimed = argv, _command_name(args), []
    try:
        with contextlib.ExitStack() as stack:
            args._stack = stack
            code = args.func(args)
            from .io import record_file
            for path, kind in args._claimed:
                if kind == "file" and path.exists():
                    record_file(path, args._command)
            return code
    except ReconguardError as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        hint = getattr(args, "_interrupted_hint", None)
        print("reconguard: interrupted; " + (hint or "nothing was written (outputs appear only when a run completes)"),
              file=sys.stderr)
        return 130
    except MemoryError:
        return _error("out of memory: the sizes asked for do not fit on this machine; lower them (e.g. --m, --size, "
                      "--k, --candidates, n_attack).")
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        return _error(f"{exc.strerror or exc}{where}; check the path and its permissions, or choose another --out.")
    except RuntimeError as exc:
        text = str(exc)
        if "allocate" in text or "out of memory" in text.lower():
            return _error("out of memory: the sizes asked for do not fit on this machine "
                          f"({text.splitlines()[0][:160]}); lower them.")
        raise


if __name__ == "__main__":
    sys.exit(main())
