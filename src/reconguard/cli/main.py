"""The ``reconguard`` command: one small module per command group over the library (no maths here).


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

from .. import __version__
from ..errors import ReconguardError
from . import attacks, audit, bounds, instahide, mia, recipes
from .common import Invocation, command_name, error_exit, finish_parser, Parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="reconguard", description="How much of a private image can an attacker reconstruct?")
    p.add_argument("--version", action="version", version=f"reconguard {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in (audit, recipes, bounds, mia, instahide, attacks):
        group.register(sub)
    finish_parser(p)
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is so that it unwinds like Ctrl-C: locks released, nothing half-written."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Run one command. A user's mistake — bad input, a path in the way, a file that is not what it should
    be, a size that cannot fit — ends with one line ``reconguard: error: …`` and exit 2; Ctrl-C with exit 130,
    SIGTERM with 143 (the resume hint, the lock released); anything unexpected with one line naming a file that
    holds the traceback, exit 1."""
    import contextlib
    import signal

    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    run = None
    try:
        args = build_parser().parse_args(argv)
        with contextlib.ExitStack() as stack:
            run = Invocation(argv, command_name(args), stack, force=bool(getattr(args, "force", False)))
            code = args.func(args, run)
            from ..io import record_file
            for path, kind in run.claimed:
                if kind == "file" and path.exists():
                    record_file(path, run.command)
            return code
    except ReconguardError as exc:
        return error_exit(str(exc))
    except KeyboardInterrupt as exc:
        term = isinstance(exc, Terminated)
        hint = run.interrupted_hint if run is not None else None
        print(f"reconguard: {'terminated' if term else 'interrupted'}; "
              + (hint or "nothing was written (outputs appear only when a run completes)"), file=sys.stderr)
        return 143 if term else 130
    except MemoryError:
        return error_exit("out of memory: the sizes asked for do not fit on this machine; lower them (e.g. --m, --size, "
                      "--k, --candidates, n_attack).")
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        return error_exit(f"{exc.strerror or exc}{where}; check the path and its permissions, or choose another --out.")
    except RuntimeError as exc:
        text = str(exc)
        if "allocate" in text or "out of memory" in text.lower():
            return error_exit("out of memory: the sizes asked for do not fit on this machine "
                          f"({text.splitlines()[0][:160]}); lower them.")
        return _internal_error(exc)
    except Exception as exc:  # noqa: BLE001 — the last resort: never a raw traceback for a user
        return _internal_error(exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _internal_error(exc: BaseException) -> int:
    """One line naming the error and a file with its traceback (a new file in the temporary folder), exit 1."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        fd, path = tempfile.mkstemp(prefix="reconguard-error-", suffix=".txt")
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(f"reconguard {__version__}\nargv: {sys.argv!r}\n\n{text}")
        where = f"details in {path}"
    except OSError:
        where = "the traceback could not be written to a file"
    first = str(exc).splitlines()[0][:200] if str(exc) else ""
    print(f"reconguard: internal error: {type(exc).__name__}: {first}; {where} (please report it)", file=sys.stderr)
    return 1
