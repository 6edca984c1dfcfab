"""The ``reconguard`` command.

    reconguard demo                       the main job: Figure-2 sweep → runs/demo/ (report.html, PNGs, JSON)
    reconguard run RECIPE [--preset P]    run a built-in recipe by name, or a YAML file by path
    reconguard recipes                    list the built-in recipes
    reconguard bound --data D --encoder E print every MSE bound for one encoder, write JSON
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .errors import ReconguardError


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _cmd_run(args, recipe: str) -> int:
    from .report import run_to_report, summary_text

    out = Path(args.out) if args.out else Path("runs") / (args.name or Path(recipe).stem)
    result, out = run_to_report(recipe, args.preset, out, progress=not args.quiet)
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

    size = args.size or (28 if args.encoder == "splitcnn" else 8)
    prior = (make_prior(args.data, size, sigma_s=args.sigma_s) if args.data == "digits" else make_prior(args.data, size))[0]
    d = prior.dim
    if args.encoder == "linear":
        enc = random_linear(d, args.m, seed=args.seed)
    elif args.encoder == "skewed":
        enc = skewed_linear(d, args.alpha, seed=args.seed)
    else:
        enc = SplitCNN(args.split, args.m, (1, size, size), seed=args.seed).to(_device(args.device))
    report = compute_bounds(enc, prior, args.sigma, tau=args.tau, k=args.k, score_samples=args.score_samples,
                            seed=args.seed, device=_device(args.device) if args.encoder == "splitcnn" else None,
                            progress=not args.quiet)
    out = Path(args.out) if args.out else Path("runs") / "bound" / f"{args.data}-{args.encoder}-m{report.m}.json"
    write_json_atomic(out, report)
    f = report.fisher
    print(f"{args.encoder} encoder on {prior.name}: d = {report.d}, m = {report.m}, rank E[G] = {report.rows[0].rank}, "
          f"E[G] {'exact' if f.exact else f'from k = {f.k} samples ({f.method})'}, τ = {report.settings['tau']:g}")
    print(f"{'sigma':>8}  {'bound':>22}  {'Maeng (Thm 1)':>13}  {'ceiling':>10}  {'RTC':>8}")
    for r in report.rows:
        print(f"{r.sigma:>8g}  {fmt(r.bound) + ' (' + ('Cor 1' if r.sigma > 0 else 'Cor 2') + ')':>22}  "
              f"{fmt(r.maeng):>13}  {fmt(r.ceiling):>10}  {fmt(r.rtc):>8}")
    print(f"bounds on E‖x̂ − x‖²/d; JSON: {out}")
    del torch
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .experiments import PRESETS

    p = argparse.ArgumentParser(prog="reconguard", description="How much of a private image can an attacker reconstruct?")
    p.add_argument("--version", action="version", version=f"reconguard {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def add_run_opts(sp, default_preset="cpu"):
        sp.add_argument("--preset", choices=PRESETS, default=default_preset,
                        help="smoke (seconds), cpu (minutes on 2 cores), paper (the paper's sizes; GPU)")
        sp.add_argument("--out", help="output folder (replaced whole when the run succeeds)")
        sp.add_argument("--quiet", action="store_true", help="no progress bars")

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
    sp.add_argument("--encoder", choices=["linear", "skewed", "splitcnn"], default="linear")
    sp.add_argument("--m", type=int, default=32, help="embedding size (linear, splitcnn)")
    sp.add_argument("--alpha", type=float, default=1.0, help="eigenvalue skew (skewed)")
    sp.add_argument("--split", choices=["early", "middle", "late"], default="middle", help="split point (splitcnn)")
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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ReconguardError as exc:
        print(f"reconguard: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
