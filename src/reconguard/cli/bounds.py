"""`reconguard bound | score train|check | train-encoder`: bounds on embeddings and what they need."""

from __future__ import annotations

from pathlib import Path

from .common import claim_output, device_of, labelled_data, param_name, add_data_opts, add_normalize_opt


def _user_encoder(module, args, prior, channels: int, size: int):
    """``(encoder, m, normalisation)``: the user's model in its pixel convention, wrapped to take the prior's ``N×d``
    samples."""
    import torch

    from ..audit.loading import probe
    from ..nn.normalize import with_normalization

    module, norm = with_normalization(module, args.normalize, channels)
    x = prior.sample(2, generator=torch.Generator().manual_seed(0)).float().reshape(2, channels, size, size)
    enc, m = probe(module.to(device_of(args.device)), x.to(device_of(args.device)))
    return enc, m, norm


def _user_model(args, channels: int):
    """``(module, channels, size)``: the user's model (:func:`reconguard.audit.loading.load_model`, loaded once) and
    its inputs' shape — its ``in_shape`` when it declares one, else the flags."""
    from ..audit.loading import load_model

    module = load_model(args.model, args.weights)
    shape = getattr(module, "in_shape", None)
    if shape is not None and len(shape) == 3:
        if args.size is not None and args.size != shape[-1]:
            from ..errors import ShapeError
            raise ShapeError(f"--model {args.model} takes {tuple(shape)} images; drop --size or pass --size {shape[-1]}.")
        return module, int(shape[0]), int(shape[-1])
    if args.size is None:
        from ..errors import ParameterError
        raise ParameterError(f"--model {args.model}: give its input size with --size (and --channels 3 for RGB).")
    return module, channels, args.size


def _cmd_bound(args, run) -> int:
    import torch

    from ..encoders import SplitCNN, random_linear, skewed_linear
    from ..experiments import compute_bounds, make_prior
    from ..io import write_json_atomic
    from ..report.html import fmt

    from ..checks import check_fits, check_positive_int
    from ..experiments.bound import choose_path

    channels = args.channels if args.data == "gaussian" else 1
    if args.model:
        user, channels, size = _user_model(args, channels)
        if args.data != "gaussian" and channels != 1:
            from ..errors import ShapeError
            raise ShapeError(f"--model {args.model} takes {channels}-channel images; {args.data} are grey (use --data "
                             "gaussian --channels 3, or `reconguard audit encoder --data YOUR_IMAGES`).")
    else:
        size = args.size or (28 if args.encoder in ("splitcnn", "resnet18") or args.data == "fashion-mnist" else 8)
    check_positive_int(size, "--size")
    check_positive_int(args.prior_n, "--prior-n")
    if args.data == "fashion-mnist" and size != 28:
        from ..errors import ShapeError
        raise ShapeError(f"fashion-mnist images are 28×28, not {size}×{size}: drop --size or pass --size 28.")
    check_positive_int(args.m, "--m")
    check_positive_int(args.k, "--k")
    d = channels * size * size
    if args.encoder in ("linear", "skewed") and not args.model:
        m = args.m if args.encoder == "linear" else d
        check_fits(8.0 * m * d, f"a linear W of {m}×{d}", "lower --m or --size")
        choose_path(d, 0, "dense")  # WᵀW is exact and dense
    tag = f"{args.data}-{'model' if args.model else args.encoder}-m{args.m}-size{size}"
    out = claim_output(run, Path(args.out) if args.out else Path("runs") / "bound" / (param_name(
        tag, args, ("data", "encoder", "model", "weights", "normalize", "m", "alpha", "split", "sigma", "tau", "k",
                    "size", "sigma_s", "score_samples", "seed", "channels", "path")
        + (("prior_n",) if args.data == "fashion-mnist" else ())) + ".json"))
    prior = (make_prior(args.data, size, channels=channels) if args.data == "gaussian"
             else make_prior(args.data, size, sigma_s=args.sigma_s, n=args.prior_n if args.data == "fashion-mnist"
                             else None))[0]
    norm, on_device = None, args.model or args.encoder in ("splitcnn", "resnet18")
    if args.model:
        enc, m, norm = _user_encoder(user, args, prior, channels, size)
    elif args.encoder == "linear":
        enc, m = random_linear(d, args.m, seed=args.seed), args.m
    elif args.encoder == "skewed":
        enc, m = skewed_linear(d, args.alpha, seed=args.seed), d
    elif args.encoder == "resnet18":
        from ..encoders import SplitResNet18
        enc, m = SplitResNet18(args.split, args.m, (channels, size, size), seed=args.seed,
                               stem="imagenet" if size >= 64 else "cifar").to(device_of(args.device)), args.m
    else:
        enc, m = SplitCNN(args.split, args.m, (1, size, size), seed=args.seed).to(device_of(args.device)), args.m
    if args.model or args.encoder not in ("linear", "skewed"):
        choose_path(d, args.k * m, args.path)
    report = compute_bounds(enc, prior, args.sigma, tau=args.tau, k=args.k, score_samples=args.score_samples,
                            seed=args.seed, device=device_of(args.device) if on_device else None,
                            progress=not args.quiet, path=args.path)
    write_json_atomic(out, {**report.to_dict(), "normalize": norm, "model": args.model})
    f = report.fisher
    print(f"{args.model or args.encoder} encoder on {prior.name}: d = {report.d}, m = {report.m}, rank E[G] = {report.rows[0].rank}, "
          f"E[G] {'exact' if f.exact else f'from k = {f.k} samples ({f.method})'}, τ = {report.settings['tau']:g}")
    print(f"path: {report.settings['path']}")
    print(f"{'sigma':>8}  {'bound':>22}  {'Maeng (Thm 1)':>13}  {'ceiling':>10}  {'RTC':>8}")
    for r in report.rows:
        print(f"{r.sigma:>8g}  {fmt(r.bound) + ' (' + ('Cor 1' if r.sigma > 0 else 'Cor 2') + ')':>22}  "
              f"{fmt(r.maeng):>13}  {fmt(r.ceiling):>10}  {fmt(r.rtc):>8}  rule: {r.kind}"
              + ("" if r.bound_plugin is None or r.bound_plugin == r.bound else f" (plug-in {fmt(r.bound_plugin)})"))
    sat = report.settings.get("saturation")
    if sat:
        print(f"E[G] sample: {sat['description']}")
    print(f"bounds on E‖x̂ − x‖²/d; JSON: {out}")
    del torch
    return 0


def _cmd_score_train(args, run) -> int:
    import torch

    from ..bounds import score_matrix, score_quality
    from ..data import smoothed_empirical_prior
    from ..io import write_json_atomic
    from ..report.plots import plot_score_quality
    from ..train import train_score_model

    data = labelled_data(args.data, args.size, args.root)
    out = claim_output(run, args.out or f"runs/score/{data.name}-sigma{args.sigma_s:g}.pt")
    claim_output(run, out.with_suffix(".json"))
    claim_output(run, out.with_suffix(".png"))
    model, fit_result = train_score_model(data, args.sigma_s, epochs=args.epochs, width=args.width, depth=args.depth,
                                          seed=args.seed, device=device_of(args.device), progress=not args.quiet)
    model.cpu().save(out)
    samples = smoothed_empirical_prior(data, args.sigma_s).sample(args.n, generator=torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        q = score_quality(score_matrix(model.score, samples.float()), samples)
    write_json_atomic(out.with_suffix(".json"), {"score_model": str(out), "fit": fit_result, "quality": q})
    plot_score_quality({f"score model ({data.name})": q}, out.with_suffix(".png"))
    print(f"score model: {out}  (final denoising loss {fit_result.history[-1]['train_loss']:.4g})")
    print(f"quality: {q.summary()}; plot {out.with_suffix('.png')}")
    return 0


def _cmd_score_check(args, run) -> int:
    import torch

    from ..bounds import ddpm_score, score_matrix, score_quality
    from ..data import smoothed_empirical_prior
    from ..io import write_json_atomic
    from ..report.plots import plot_score_quality

    data = labelled_data(args.data, args.size, args.root)
    prior = smoothed_empirical_prior(data, args.sigma_s)
    out = claim_output(run, args.out or f"runs/score/quality-{data.name}.png")
    claim_output(run, out.with_suffix(".json"))
    samples = prior.sample(args.n, generator=torch.Generator().manual_seed(args.seed))
    qualities = {}
    if args.model:
        from ..audit.loading import load_model, probe
        from ..nn.score import ScoreModel

        model = load_model(args.model, args.weights)
        if not isinstance(model, ScoreModel):  # the user's own: images in, the score ∇ log π (same shape) out
            wrapped, m = probe(model, samples[:2].float().reshape(2, *data.shape))
            if m != samples.shape[1]:
                from ..errors import ShapeError
                raise ShapeError(f"--model {args.model} gives {m} numbers per image; a score gives one per pixel "
                                 f"({samples.shape[1]}).")
        fn = model.score if isinstance(model, ScoreModel) else wrapped
        with torch.no_grad():
            qualities["score model"] = score_quality(score_matrix(fn, samples.float()), samples)
    if args.ddpm:
        from ..nn.ddpm import load_ddpm
        unet, sched = load_ddpm(args.ddpm)
        fn = ddpm_score(unet.to(device_of(args.device)), sched, args.sigma_s, in_shape=data.shape)
        qualities[f"DDPM (t={fn.timestep})"] = score_quality(score_matrix(fn, samples), samples)
    if args.exact or not qualities:
        qualities["exact smoothed-empirical"] = score_quality(score_matrix(prior, samples), samples)
    plot_score_quality(qualities, out)
    write_json_atomic(out.with_suffix(".json"), qualities)
    for name, q in qualities.items():
        print(f"{name:28s} {q.summary()}")
    print(f"plot: {out}")
    return 0


def _cmd_train_encoder(args, run) -> int:
    import torch
    from torch import nn

    from ..encoders import SplitCNN, SplitResNet18, save_encoder
    from ..io import write_json_atomic
    from ..train import fit

    data = labelled_data(args.data, args.size, args.root)
    out = claim_output(run, args.out or f"runs/encoders/{data.name}-{args.encoder}-{args.split}-m{args.m}.pt")
    claim_output(run, out.with_suffix(".json"))
    if args.encoder == "splitcnn":
        enc = SplitCNN(args.split, args.m, data.shape, seed=args.seed)
    else:
        enc = SplitResNet18(args.split, args.m, data.shape, seed=args.seed, weights=args.weights)
    perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(args.seed))
    cut = int(0.9 * len(data))
    model = nn.Sequential(enc, enc.downstream())
    result = fit(model, data.subset(perm[:cut]), data.subset(perm[cut:]), epochs=args.epochs, lr=args.lr,
                 batch_size=args.batch_size, seed=args.seed, device=device_of(args.device), progress=not args.quiet)
    save_encoder(enc.cpu(), out)
    write_json_atomic(out.with_suffix(".json"), {"encoder": str(out), "fit": result})
    print(f"encoder: {out}  best epoch {result.best_epoch}: validation accuracy {result.best_val_acc:.3f}, "
          f"loss {result.best_val_loss:.4g}")
    return 0


def register(sub) -> None:
    sp = sub.add_parser("bound", help="every MSE bound for one encoder on one prior")
    sp.add_argument("--data", choices=["gaussian", "digits", "fashion-mnist"], default="gaussian",
                    help="prior: gaussian (closed form); digits (scikit-learn's 8×8 digits, resized to --size) or "
                    "fashion-mnist (Debian's dataset-fashion-mnist, 28×28; --prior-n of its training images), each "
                    "smoothed by --sigma-s, its score exact")
    sp.add_argument("--prior-n", type=int, default=10000, help="fashion-mnist: training images in the smoothed "
                    "empirical prior (as the fig2-linear fashion preset)")
    sp.add_argument("--encoder", choices=["linear", "skewed", "splitcnn", "resnet18"], default="linear")
    sp.add_argument("--channels", type=int, choices=[1, 3], default=1, help="channels of the Gaussian prior's images "
                    "(3 for RGB encoders such as resnet18)")
    sp.add_argument("--path", choices=["auto", "dense", "lowrank"], default="auto",
                    help="dense: d×d E[G] and S; lowrank: E[G] as the Gram of its k·m Jacobian rows with an exactly "
                    "isotropic S (Gaussian prior), for inputs as large as 3×224×224; auto: dense when it fits")
    sp.add_argument("--model", "--encoder-file", dest="model", help="your encoder (replaces --encoder/--m/--split): "
                    "path/to/file.py:NAME or package.module:NAME (with --weights), a TorchScript .pt, or a "
                    "`reconguard train-encoder` file")
    sp.add_argument("--weights", help="--model's state dict (.pt, read with weights_only=True) or .safetensors")
    add_normalize_opt(sp)
    sp.add_argument("--m", type=int, default=32, help="embedding size (linear, splitcnn)")
    sp.add_argument("--alpha", type=float, default=1.0, help="eigenvalue skew (skewed)")
    sp.add_argument("--split", choices=["early", "middle", "late"], default="middle",
                    help="split point (splitcnn, resnet18)")
    sp.add_argument("--sigma", type=float, nargs="+", default=[0.0, 1e-3], help="encoder noise std(s)")
    sp.add_argument("--tau", type=float, default=None,
                    help="null-space threshold (fraction of λ_max); default 0, the guarantee; τ > 0 is the paper's "
                    "heuristic (section 6.4.3), labelled as such")
    sp.add_argument("--k", type=int, default=256, help="inputs averaged to estimate E[G] (splitcnn)")
    sp.add_argument("--size", type=int, default=None, help="image side (d = size²); default 8, 28 for splitcnn")
    sp.add_argument("--sigma-s", type=float, default=0.1, help="smoothing noise of the digits / fashion-mnist prior")
    sp.add_argument("--score-samples", type=int, default=20000, help="samples averaged for S (digits, fashion-mnist)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="auto", help="auto | cpu | cuda")
    sp.add_argument("--out", help="JSON path (default runs/bound/<data>-<encoder>-m<m>.json)")
    sp.add_argument("--quiet", action="store_true")
    sp.set_defaults(func=_cmd_bound)

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
    sp.add_argument("--model", help="a `reconguard score train` file, or your score model (path/to/file.py:NAME, "
                    "package.module:NAME with --weights, TorchScript): images in, ∇ log π of the same shape out")
    sp.add_argument("--weights", help="--model's state dict (.pt, weights_only) or .safetensors")
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
