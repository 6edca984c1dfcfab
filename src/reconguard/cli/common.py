"""What every command shares: claiming outputs, option digests, devices, the parser and its help."""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Invocation:
    """One command's own state, passed to it explicitly beside its parsed ``args``: the argv it was called with, its
    name (recorded in what it writes), the ``ExitStack`` holding its output locks, the outputs it claimed, and the
    line an interruption prints (``interrupted_hint``, set by commands that can resume)."""

    argv: list
    command: str
    stack: contextlib.ExitStack
    force: bool = False
    claimed: list = field(default_factory=list)
    interrupted_hint: str | None = None


def claim_output(run: Invocation, path, kind: str = "file") -> Path:
    """Check that this run may write ``path`` (``reconguard.io.check_output``: new, or an earlier result of the
    same command, or ``--force``) and hold its lock until the command ends. Call before the work starts."""
    from ..io import claim_output

    path = Path(path)
    run.stack.enter_context(claim_output(path, run.command, kind=kind, force=run.force))
    run.claimed.append((path, kind))
    return path


def invocation() -> str:
    """How to run reconguard again from here: ``reconguard`` when that is on PATH, else the script's own path
    (``.venv/bin/reconguard`` after ``make demo``), else ``python -m reconguard``."""
    import os
    import shlex
    import shutil

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name == "reconguard":
        on_path = shutil.which("reconguard")
        if on_path and Path(on_path).resolve() == script.resolve():
            return "reconguard"
        return shlex.quote(os.path.relpath(script) if not script.is_absolute() or str(script).startswith(os.getcwd())
                           else str(script))
    return f"{shlex.quote(sys.executable)} -m reconguard"


def resume_hint(run: Invocation, prefix: str = "") -> str:
    """The line that tells an interrupted run how to continue (with --resume)."""
    import shlex

    argv = " ".join(shlex.quote(a) for a in run.argv)
    return f"{prefix}resume with: {invocation()} {argv}" + ("" if "--resume" in run.argv else " --resume")


def param_name(prefix: str, args, keys) -> str:
    """``prefix`` plus a short digest of every option in ``keys``: runs with other settings get other files."""
    import hashlib
    import json

    blob = json.dumps({k: getattr(args, k, None) for k in keys}, sort_keys=True, default=str)
    return f"{prefix}-{hashlib.sha1(blob.encode()).hexdigest()[:8]}"


def device_of(name: str):
    """``--device`` as a torch device: auto, cpu, cuda or cuda:N, checked against this build and machine."""
    from ..inputs import check_device

    return check_device(name)


def labelled_data(name: str, size: int | None, root: str | None, need_labels: bool = True):
    """A named data set (``digits``, ``sample-photos``, ``fashion-mnist``, ``mnist``, ``cifar10``) or the user's own images: an image
    folder (class sub-folders give the labels), an ``.npy`` or an ``.npz`` (``images`` and ``labels``), resized to
    ``size`` when given."""
    from ..data import ImageDataset, load_named
    from ..data.datasets import resize_images
    from ..data.files import NAMED
    from ..errors import ParameterError

    if name in NAMED:
        d = load_named(name, size, root)
        if need_labels and bool((d.labels < 0).any()):
            raise ParameterError(f"--data {name}: no labels (crops of photographs); use it as the attacker's --public "
                                 "images, or give a labelled data set.")
        return d
    from ..audit.loading import load_images

    x, y = load_images(name, labels=True, size=size)  # a folder of mixed sizes is resized image by image
    x = resize_images(x, size)
    if y is None:
        import torch

        if need_labels:
            raise ParameterError(f"--data {name}: no labels; give class sub-folders ({name}/<class>/<image>) or an "
                                 ".npz with 'images' and 'labels'.")
        y = torch.zeros(len(x), dtype=torch.long)
    return ImageDataset(x, y, name=Path(str(name)).stem)


def data_arg(text: str) -> str:
    """``--data`` / ``--public``: a named data set, or a folder / .npy / .npz that exists."""
    from ..data.files import NAMED

    if text in NAMED or text == "auto" or Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is neither one of {', '.join(NAMED)} nor an existing image folder, "
                                     ".npy or .npz")


class Parser(argparse.ArgumentParser):
    """argparse with reconguard's one-line errors: ``reconguard: error: …`` and exit 2."""

    def error(self, message):
        sys.stderr.write(f"reconguard: error: {self.prog}: {message} (see `{self.prog} --help`)\n")
        sys.exit(2)


def _subparsers(p: argparse.ArgumentParser):
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in dict.fromkeys(action.choices.values()):
                yield sp
                yield from _subparsers(sp)


_HELP = {  # options many commands share, and the few left without a help of their own
    "data": "dataset: digits ships with scikit-learn; fashion-mnist from Debian's dataset-fashion-mnist (or --root); "
            "mnist / cifar10 load from --root",
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


def _seed_arg(text: str) -> int:
    from ..errors import ParameterError
    from ..inputs import check_seed

    try:
        return check_seed(text, "--seed")
    except ParameterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _device_arg(text: str) -> str:
    from ..errors import ReconguardError

    try:
        device_of(text)
    except ReconguardError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def finish_parser(p: argparse.ArgumentParser) -> None:
    """Every command shows its defaults; every command that writes (--out) takes --force; every --seed and
    --device is checked as argv is read (the edge: a bad value is one line before any work)."""
    for sp in _subparsers(p):
        sp.formatter_class = _DefaultsFormatter
        for a in sp._actions:
            if a.dest == "seed" and a.option_strings:
                a.type = _seed_arg
            if a.dest == "device" and a.option_strings:
                a.type = _device_arg
        for a in sp._actions:
            if a.help is None and a.dest in _HELP:
                a.help = _HELP[a.dest]
        options = {o for a in sp._actions for o in a.option_strings}
        if "--out" in options and "--force" not in options:
            sp.add_argument("--force", action="store_true",
                            help="write even where --out holds files reconguard did not write, or another "
                            "command's results (they are replaced)")


_SUBCOMMANDS = ("score_command", "instahide_command", "attack_command", "audit_command")


def command_name(args) -> str:
    """The command a run belongs to, for output markers: ``run fig2-linear``, ``instahide attack carlini``…"""
    parts = [args.command] + [getattr(args, k) for k in _SUBCOMMANDS if getattr(args, k, None)]
    if args.command == "instahide" and getattr(args, "instahide_command", None) == "attack":
        parts.append(args.method)
    if args.command in ("run", "demo"):
        parts = ["run", Path(args.recipe).stem if args.command == "run" else "fig2-linear"]
    return " ".join(parts)


def error_exit(message: str, code: int = 2) -> int:
    print(f"reconguard: error: {message}", file=sys.stderr)
    return code


def add_data_opts(sp, default_size=None):
    sp.add_argument("--data", type=data_arg, default="digits", help="digits, fashion-mnist, mnist, cifar10, or your "
                    "own images: a folder (class sub-folders give the labels), an .npy or an .npz (images, labels)")
    sp.add_argument("--root", help="local folder with the MNIST / Fashion-MNIST IDX files or CIFAR-10 batches "
                    "(fashion-mnist: default Debian's dataset-fashion-mnist folder)")
    sp.add_argument("--size", type=int, default=default_size, help="digits image side (default 8)")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--device", default="auto")
    sp.add_argument("--out")
    sp.add_argument("--quiet", action="store_true")


def add_settings_flags(sp, cls, spec: dict) -> None:
    """Flags for fields of a settings dataclass, their defaults and types taken from the dataclass (one place):
    ``spec`` maps a field to its help, or to ``(help, choices)``."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, text in spec.items():
        text, choices = text if isinstance(text, tuple) else (text, None)
        default = fields[name].default
        sp.add_argument("--" + name.replace("_", "-"), type=type(default) if default is not None else str,
                        default=default, choices=choices, help=text)


def add_run_opts(sp, func, out_help: str) -> None:
    """What every long-running command ends with: --out, --quiet, --device, and the function it runs."""
    sp.add_argument("--out", help=out_help)
    sp.add_argument("--quiet", action="store_true")
    sp.add_argument("--device", default="auto")
    sp.set_defaults(func=func)


def add_normalize_opt(sp) -> None:
    """``--normalize``, the same on every command that runs a user's model."""
    sp.add_argument("--normalize", default="none", help="the pixel convention your model expects: none, imagenet, "
                    "symmetric ([-1, 1]) or MEANS:STDS per channel; applied inside the model, so images, attacks and "
                    "MSE stay in [0, 1] pixels (recorded in the results)")
