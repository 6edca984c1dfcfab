"""`reconguard instahide …`: public patches, training, challenges, attacks, scores."""

from __future__ import annotations


from .common import claim_output, device_of, labelled_data, param_name, add_data_opts, data_arg


def _search_pixels(text: str):
    """``--search-pixels``: "auto", "all" (None: every pixel) or a count, checked by the attack's own rule
    (``carlini_options.check_search_pixels``)."""
    import argparse

    from ..attacks.instahide.carlini_options import check_search_pixels
    from ..errors import ParameterError

    try:
        return check_search_pixels(None if text == "all" else int(text) if text.lstrip("-").isdigit() else text)
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(f"expected auto, all or a positive number of pixels ({exc})") from None


def _cmd_prepare_public(args, run) -> int:
    from ..data import prepare_public

    claim_output(run, args.out, "dir")
    store = prepare_public(args.out, args.folder, size=args.size, channels=args.channels, crop=args.crop,
                           patches_per_image=args.per_image, min_keypoints=args.min_keypoints, seed=args.seed,
                           progress=not args.quiet)
    print(f"{len(store)} patches of shape {store.shape} with > {args.min_keypoints} SIFT keypoints → {store.folder}")
    return 0


def _cmd_instahide_train(args, run) -> int:
    from ..experiments.instahide import public_pool, run_accuracy
    from ..io import write_json_atomic
    from ..report.accuracy import accuracy_summary
    from ..experiments.instahide import AccuracyResult

    data = labelled_data(args.data, args.size, args.root)
    out = claim_output(run, args.out or param_name(f"runs/instahide/{data.name}-{args.method}-{args.mode}-k{args.k}", args,
                                               ("epochs", "T", "own_floor", "epsilon", "public", "seed")) + ".json")
    spec = {"method": args.method, "k": args.k, "mode": args.mode}
    from ..experiments.params import AccuracyParams

    cfg = AccuracyParams(epochs=args.epochs, T=args.T, own_floor=args.own_floor, dp={"target_epsilon": args.epsilon},
                         seed=args.seed)
    rows, n_train, n_test = run_accuracy(data, [spec], cfg, device=device_of(args.device),
                                         public=public_pool(args.public, data.shape) if args.mode == "cross" else None)
    settings = {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "func"}
    result = AccuracyResult("instahide-train", "cli", f"{args.method} on {data.name}", settings,
                            rows, rows[0].seconds, data.name, n_train, n_test)
    write_json_atomic(out, result)
    print(accuracy_summary(result))
    print(f"  JSON: {out}")
    return 0


def _cmd_challenge(args, run) -> int:
    import torch

    from ..attacks.instahide import make_challenge
    from ..encoders import InstaHide
    from ..encoders.instahide import paper_c1
    from ..experiments.instahide import public_pool

    from ..io import atomic_directory

    data = labelled_data(args.data, args.size, args.root)
    out = claim_output(run, args.out or "runs/challenge", "dir")
    truth = claim_output(run, args.truth or f"{out}-truth", "dir")
    if out.resolve() == truth.resolve():
        from ..errors import ParameterError
        raise ParameterError("--truth must be another folder than --out: the ground truth is kept apart.")
    pub = public_pool(args.public, data.shape) if args.mode == "cross" else None
    normalize = args.normalization
    if normalize == "published":  # fixed constants of the whole data set, recorded in challenge.json for the attack
        normalize = InstaHide(args.k).channel_stats(torch.as_tensor(data.images, dtype=torch.float32))
    scheme = InstaHide(args.k, c1=paper_c1(args.k), mode=args.mode, public=pub, num_classes=int(data.labels.max()) + 1,
                       public_normalize=args.public_normalize, normalize=normalize)
    with atomic_directory(out, run.command, args.force) as tmp_out, \
            atomic_directory(truth, run.command, args.force) as tmp_truth:  # both or neither, files listed
        make_challenge(scheme, data.images, data.labels, args.n, args.T, tmp_out, tmp_truth, seed=args.seed)
    print(f"{args.n}×{args.T} encryptions (k={args.k}, {args.mode}) → {out}/encryptions.npy, labels.npy; "
          f"ground truth → {truth}/ (keep it apart)")
    return 0


def _cmd_public_search(args, run) -> int:
    """Section 5.3's search for the public sources of randomly cropped patches in cross-dataset encryptions."""
    from ..experiments.instahide_attacks import run_public_search

    rows = run_public_search(k=args.k, size=args.size, source_size=args.source_size, n_sources=args.sources,
                             queries=args.queries, scorers=args.scorers.split(","), steps=args.steps, seed=args.seed,
                             progress=not args.quiet)
    print(f"public-source search, InstaHide cross k={args.k}, {args.size}×{args.size} crops of "
          f"{args.source_size}×{args.source_size} sources, N={args.sources}, {args.queries} encryptions")
    print(f"{'scorer':14s} {'top-m':>6s} {'hit rate':>9s} {'chance':>7s}")
    for r in rows:
        print(f"{r.scorer:14s} {r.m:6d} {r.hit_rate:9.3f} {r.chance:7.3f}")
    return 0


def _cmd_score(args, run) -> int:

    from ..attacks.instahide import score_challenge

    from ..checks import load_array

    recovered = load_array(args.recovered, "recovered images (an N×C×H×W .npy in [0, 1])", ndim=(3, 4))
    s = score_challenge(recovered, args.truth)
    print(f"{s.summary()} ({s.n_recovered} recovered images)")
    return 0


def _cmd_instahide_attack(args, run) -> int:
    """Attack a challenge folder written by `instahide challenge` (encryptions.npy, labels.npy)."""
    import numpy as np

    from ..attacks.instahide import score_challenge
    from ..errors import ParameterError
    from ..experiments.challenge import attack_challenge, ks_challenge, load_challenge
    from ..io import atomic_file

    ch = load_challenge(args.challenge, args.k, args.mode, args.n, args.c1, args.c2, args.normalization)
    if args.method == "ks":
        if not args.truth:
            raise ParameterError("the KS test groups encryptions by their private image: give --truth DIR.")
        r = ks_challenge(ch, args.truth)
        print(f"KS statistic, one image's encryptions vs all: {r.statistic_all:.3f} (p {r.pvalue_all:.3g}); "
              f"vs the others': {r.statistic_other:.3f} (p {r.pvalue_other:.3g})  [{r.n_images} images × {r.n_encryptions}]")
        return 0
    args.k, args.mode, args.n = ch.k, ch.mode, ch.n  # the output name records what was attacked
    from ..data.files import auto_public

    args.public = auto_public(args.public, ch.encryptions.shape[1])
    out = claim_output(run, args.out or ch.folder.parent / (param_name(
        f"{ch.folder.name}-{args.method}-k{ch.k}-{ch.mode}", args,
        ("n", "restarts", "label_free", "similarity_steps", "m", "demask", "pool", "public", "seed")) + ".npy"))
    from ..data.datasets import resize_images

    # the attacker's own images, any size and colour: brought to the challenge's once, here
    public = labelled_data(args.public, ch.encryptions.shape[-1], args.public_root, need_labels=False).images
    public = resize_images(public, ch.encryptions.shape[-1], ch.encryptions.shape[1])
    from ..attacks.registry import pick_options

    r = attack_challenge(ch, args.method, public, label_free=args.label_free, pool=args.pool,
                         **pick_options(args.method, {**vars(args), "progress": not args.quiet}))
    print(f"{r.description} in {r.seconds:.1f} s")
    if r.caveat:
        print(f"caveat: {r.caveat}")
    with atomic_file(out) as tmp, open(tmp, "wb") as fh:
        np.save(fh, r.images.numpy())
    print(f"recovered images → {out}")
    if args.truth:
        print(score_challenge(r.images, args.truth).summary())
    return 0


def register(sub) -> None:
    from ..attacks.registry import encrypted_attack_names
    from ..experiments.instahide import METHODS

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
    sp.add_argument("--method", choices=METHODS, default="instahide")
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
    sp.add_argument("--public-normalize", choices=["private", "own"], default="private",
                    help="cross mode: normalise the public images with the private set's statistics or their own "
                    "(the reference code's and the published challenge's convention)")
    sp.add_argument("--normalization", choices=["dataset", "published", "symmetric"], default="dataset",
                    help="the owner's pixel normalisation: the n private images' channel statistics (never published), "
                    "fixed constants of the whole data set recorded in challenge.json (as InstaHide's code fixes "
                    "CIFAR-10's: the attack reads them), or [-1, 1]")
    sp.add_argument("--truth", help="folder for the ground truth (default: <out>-truth)")
    sp.set_defaults(func=_cmd_challenge)
    sp = isub.add_parser("attack", help="attack a challenge: carlini (lifting), averaging (weak, optional demasking), ks")
    sp.add_argument("method", choices=[*encrypted_attack_names(), "ks"])
    sp.add_argument("--challenge", required=True, help="folder with encryptions.npy and labels.npy")
    sp.add_argument("--truth", help="the challenge's truth folder: score the recovery (ks: group by image)")
    sp.add_argument("--k", type=int, default=None, help="images per mix (default: the challenge's challenge.json, else 4)")
    sp.add_argument("--n", type=int, help="carlini: the number of private images (default: from challenge.json)")
    sp.add_argument("--c1", type=float, default=None, help="carlini: the scheme's largest coefficient (default: "
                    "challenge.json, else 0.65)")
    sp.add_argument("--c2", type=float, default=None, help="carlini, cross mode: the least mass of the two private "
                    "images (default: challenge.json, else 0.3)")
    sp.add_argument("--normalization", choices=["dataset", "symmetric"], default=None,
                    help="how the owner normalised the pixels: the private set's mean/std per channel, or [-1, 1] "
                    "(default: challenge.json, else dataset)")
    sp.add_argument("--restarts", type=int, default=None, help="carlini: random restarts of the assignment (default: 4 "
                    "with the lifting; with the direct X-step round(120,000 / (N·n)), 1 to 6; on the sign-synchronising "
                    "path, its k-means starts: 5)")
    sp.add_argument("--solver", choices=["auto", "lift", "direct"], default="auto",
                    help="carlini: the X-step (auto: direct, which needs no pair of images to co-occur; lift: the "
                    "least-squares lifting, for N ≥ n(n+1)/2)")
    sp.add_argument("--search", choices=["auto", "exhaustive", "local", "exact"], default="auto",
                    help="carlini with labels: score every label-consistent assignment, change one class's members "
                    "at a time (local), or solve each state exactly by meeting in the middle (exact; auto: exact when "
                    "there are more than 2,000,000, e.g. inside k = 4 at n = 100)")
    sp.add_argument("--noise-rank", type=int, default=20,
                    help="carlini, cross mode: how many dominant directions of the public part (smooth image texture) the "
                    "assignment's error discounts (0: plain squared error)")
    sp.add_argument("--splits", type=int, default=10,
                    help="carlini, direct X-step: at most this many k-means split moves per start (a slot holding a blend "
                    "of two images re-seeded from its encryptions; 0: none)")
    sp.add_argument("--split-patience", type=int, default=None,
                    help="carlini: stop the split moves after this many in a row end no lower than the best (default: "
                    "every one of --splits; README: what 2 saves on label-free Fashion-MNIST and, with --max-rounds 60, on crops)")
    sp.add_argument("--max-rounds", type=int, default=None,
                    help="carlini: at most this many rounds (X-step + assignment) per start over all its phases, which "
                    "caps the attack's time (default: no cap; README: what 100 gives on label-free Fashion-MNIST)")
    sp.add_argument("--sign-sync", choices=["auto", "on", "off"], default="auto",
                    help="carlini, cross mode with labels: the clustered start and sign-synchronising X-step in place of "
                    "the search (auto: when the attacker's images give pixels no sign, as natural photographs do)")
    sp.add_argument("--public-normalization", choices=["auto", "private", "own"], default="auto",
                    help="carlini, cross mode: how the owner normalised the public images — the private set's statistics "
                    "or the public pool's own (auto: read off the encryptions' moments, with a warning when they hardly "
                    "tell the two apart)")
    sp.add_argument("--search-pixels", type=_search_pixels, default="auto",
                    help="carlini: fit the assignment search on this many random pixels, then solve every pixel (auto: "
                    "256 inside, 1,024 cross with labels, 512 label-free — the README's published-size settings; all: "
                    "every pixel, slower)")
    sp.add_argument("--prior-moves", type=int, default=8,
                    help="carlini: rounds of single-pixel moves (−x, black, white) kept where they lower the fit's error "
                    "plus a Gaussian prior of your own images (repairs colour speckle on natural images; 0: none)")
    sp.add_argument("--denormalize", choices=["own", "range"], default="range",
                    help="carlini, the owner's normalisation not published (inside mode, and cross mode on natural "
                    "images): de-normalise with the constants read off the recovery's range (range, the default; cross: "
                    "its 3%% quantiles against your own images'), or with your own images' statistics (own)")
    sp.add_argument("--mode", choices=["inside", "cross"], default=None,
                    help="carlini: the challenge's InstaHide mode (cross: public images in every mix; default: from "
                    "challenge.json, else inside)")
    sp.add_argument("--pool", default="samples", help="carlini, cross mode: the public pool's kind (noise model; "
                    "'samples' or a PatchStore folder)")
    sp.add_argument("--label-free", action="store_true", help="carlini: ignore the released labels (coefficients "
                    "searched on a grid; inside k ≥ 4 each encryption's members among its likeliest images, under pair "
                    "scores read off the encryptions themselves unless --similarity-steps trains a network)")
    sp.add_argument("--similarity-steps", type=int, default=0, help="carlini: train the pair-similarity network for "
                    "this many steps on the attacker's own encryptions and start one restart from its clustering")
    sp.add_argument("--m", type=int, default=5, help="averaging: neighbours averaged")
    sp.add_argument("--demask", action="store_true", help="averaging: undo the sign mask with a demasking network first")
    sp.add_argument("--public", type=data_arg, default="auto",
                    help="the attacker's own data of the same kind (signs, statistics, demasker training): digits, "
                    "sample-photos, fashion-mnist, mnist, cifar10, or a folder / .npy / .npz of your images (any "
                    "size: resized); default auto: sample-photos for an RGB release, digits for a grey one")
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
