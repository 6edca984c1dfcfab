"""`reconguard audit encoder | encrypted | classifier`: the user's own release in, one report out."""

from __future__ import annotations

import sys

from .common import claim_output, device_of, add_normalize_opt

_OUT = "report folder: report.html (verdict on top), PNG plots, results.json (default runs/audit/<kind>)"


def _write(args, run, out, result) -> int:
    from ..report import summary_text, write_report

    out = write_report(result, out, command=run.command, force=args.force)
    print(summary_text(result, out))
    return 0


def _cmd_encoder(args, run) -> int:
    from .. import audit

    out = claim_output(run, args.out or "runs/audit/encoder", "dir")
    result = audit.encoder(args.model, args.data, sigmas=args.sigma, preset=args.preset, score=args.score,
                           sigma_s=args.sigma_s, weights=args.weights, device=device_of(args.device), seed=args.seed,
                           progress=not args.quiet, normalize=args.normalize, path=args.path,
                           max_minutes=args.max_minutes, announce=None if args.quiet else _say)
    _warn(result)
    return _write(args, run, out, result)


def _warn(result) -> None:
    for warning in result.warnings:
        print(f"reconguard: warning: {warning}", file=sys.stderr)


def _say(line: str) -> None:
    print(line, flush=True)


def _cmd_classifier(args, run) -> int:
    from .. import audit

    out = claim_output(run, args.out or "runs/audit/classifier", "dir")
    result = audit.classifier(args.model, args.private, args.public, num_classes=args.classes, weights=args.weights,
                              preset=args.preset, eps=args.eps, size=args.size, device=device_of(args.device),
                              seed=args.seed, progress=not args.quiet, normalize=args.normalize)
    _warn(result)
    return _write(args, run, out, result)


def _cmd_encrypted(args, run) -> int:
    from .. import audit

    out = claim_output(run, args.out or "runs/audit/encrypted", "dir")
    result = audit.encrypted(args.data, truth=args.truth, public=args.public, public_root=args.public_root,
                             attacks=args.attacks, k=args.k, mode=args.mode, n=args.n, label_free=args.label_free,
                             restarts=args.restarts, m=args.m, demask=args.demask, pool=args.pool, seed=args.seed,
                             progress=not args.quiet)
    return _write(args, run, out, result)


def _common(sp, func) -> None:
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--out", help=_OUT)
    sp.add_argument("--quiet", action="store_true")
    sp.add_argument("--device", default="auto")
    sp.set_defaults(func=func)


def register(sub) -> None:
    from ..audit.classifier import PRESETS as CLASSIFIER_PRESETS
    from ..audit.encoder import PRESETS
    from ..audit.encrypted import ATTACKS

    a = sub.add_parser("audit", help="audit your own release: an encoder, encrypted data, a classifier")
    asub = a.add_subparsers(dest="audit_command", required=True)
    sp = asub.add_parser("encoder", help="your encoder (split inference / instance encoding): the lower bound on "
                         "reconstruction error and the strongest attacks, on your images")
    sp.add_argument("--model", required=True, help="path/to/file.py:NAME or package.module:NAME (a class or a "
                    "zero-argument factory returning an nn.Module), or a TorchScript .pt")
    sp.add_argument("--weights", help="a state dict (.pt, read with weights_only=True) or .safetensors")
    sp.add_argument("--data", required=True, help="an image folder, a .npy / .npz array (N×C×H×W or N×H×W, in [0, 1] "
                    "or uint8), or digits")
    sp.add_argument("--sigma", type=float, nargs="+", default=[0.0], help="noise std(s) of the release (0: the "
                    "encoder as it is)")
    sp.add_argument("--score", default="exact", help="the prior's score: exact (the smoothed empirical prior of "
                    "your images), trained (a denoising score model on them) or ddpm:DIR (a local DDPM)")
    sp.add_argument("--sigma-s", type=float, default=0.1, help="smoothing noise of the prior π (pixel units)")
    add_normalize_opt(sp)
    sp.add_argument("--path", choices=["auto", "dense", "lowrank"], default="auto", help="dense: d×d E[G] and S; "
                    "lowrank: E[G] as the Gram of its Jacobian rows with S̃ = I/σ_s² (⪰ the prior's S: conservative), "
                    "for images as large as 3×224×224; auto: dense where it fits in half the memory and d ≤ 2,048")
    sp.add_argument("--preset", choices=tuple(PRESETS), default="cpu",
                    help="smoke (seconds), cpu (minutes on 2 cores), paper (a GPU)")
    sp.add_argument("--max-minutes", type=float, help="fit the preset to this budget: k, the MAP steps, the decoder's "
                    "epochs and the attacked images scaled down together from the time estimate printed first")
    _common(sp, _cmd_encoder)

    sp = asub.add_parser("encrypted", help="your encrypted release (InstaHide / Mixup): every attack that applies, "
                         "scored against the truth when you give it")
    sp.add_argument("--data", required=True, help="folder with encryptions.npy and labels.npy (as `reconguard "
                    "instahide challenge` writes)")
    sp.add_argument("--truth", help="the owner's truth folder: score each recovery (identified, 1-to-1 SSIM, baseline)")
    sp.add_argument("--attacks", nargs="+", choices=ATTACKS, default=list(ATTACKS))
    sp.add_argument("--public", default="auto", help="the attacker's own data of the same kind: digits, "
                    "sample-photos, mnist, fashion-mnist, cifar10, an image folder or a .npy (default auto: sample-photos "
                    "for an RGB release, "
                    "digits for a grey one)")
    sp.add_argument("--public-root", help="folder of --public mnist / cifar10")
    sp.add_argument("--k", type=int, help="images per mix (default: challenge.json, else 4)")
    sp.add_argument("--mode", choices=["inside", "cross"], help="InstaHide mode (default: challenge.json, else inside)")
    sp.add_argument("--n", type=int, help="private images (default: challenge.json)")
    sp.add_argument("--label-free", action="store_true", help="carlini: ignore the released labels")
    sp.add_argument("--restarts", type=int, default=None, help="carlini: random restarts, or the sign-synchronising "
                    "path's k-means starts (default: the attack's)")
    sp.add_argument("--m", type=int, default=5, help="averaging: neighbours averaged")
    sp.add_argument("--demask", action="store_true", help="averaging: undo the sign mask with a demasking network")
    sp.add_argument("--pool", default="samples", help="cross mode: the public pool's kind (noise model)")
    _common(sp, _cmd_encrypted)

    sp = asub.add_parser("classifier", help="your classifier: model inversion (generative prior, selection only, "
                         "gradient inversion), robust accuracy, HSIC")
    sp.add_argument("--model", required=True, help="path/to/file.py:NAME, package.module:NAME or a TorchScript .pt")
    sp.add_argument("--weights", help="a state dict (.pt, weights_only) or .safetensors")
    add_normalize_opt(sp)
    sp.add_argument("--classes", type=int, help="number of private classes (default: from the labels)")
    sp.add_argument("--private", default="digits", help="labelled private data: a folder with one sub-folder per "
                    "class, a .npz with images and labels, or digits (classes 0–4)")
    sp.add_argument("--public", default="digits", help="public data of the same kind (the attacker's prior trains on "
                    "it only): an image folder, a .npy / .npz, or digits (classes 5–9)")
    sp.add_argument("--size", type=int, help="digits: image side (default 16)")
    sp.add_argument("--eps", type=float, nargs="*", help="robust-accuracy radii (default the paper's 0.031 0.0025 "
                    "0.0005 1e-5)")
    sp.add_argument("--preset", choices=tuple(CLASSIFIER_PRESETS), default="cpu")
    _common(sp, _cmd_classifier)
