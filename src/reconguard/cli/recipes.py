"""`reconguard demo | run | recipes`: recipes and their reports."""

from __future__ import annotations

from pathlib import Path

from ..experiments import PRESETS
from .common import claim_output, device_of, resume_hint


def _cmd_run(args, run, recipe: str) -> int:
    from ..report import run_to_report, summary_text

    out = claim_output(run, Path(args.out) if args.out else Path("runs") / (args.name or Path(recipe).stem), "dir")
    run.interrupted_hint = resume_hint(run, "finished units are kept; ")
    result, out = run_to_report(recipe, args.preset, out, progress=not args.quiet, device=device_of(args.device),
                                command=run.command, force=args.force, resume=args.resume)
    print(summary_text(result, out))
    return 0


def _cmd_recipes(args, run) -> int:
    from ..experiments import list_recipes, load_recipe

    for name in list_recipes():
        r = load_recipe(name)
        print(f"{name:16s} {r['title']}  (presets: {', '.join(r.get('presets', {}))})")
    return 0


def register(sub) -> None:
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
    sp.set_defaults(func=lambda a, run: _cmd_run(a, run, "fig2-linear"), name="demo")

    sp = sub.add_parser("run", help="run a recipe (built-in name or YAML path) and write its report")
    sp.add_argument("recipe")
    add_run_opts(sp)
    sp.set_defaults(func=lambda a, run: _cmd_run(a, run, a.recipe), name=None)

    sp = sub.add_parser("recipes", help="list the built-in recipes")
    sp.set_defaults(func=_cmd_recipes)
