"""Atomic writes, and the rules for where a run may write.

* A failed run leaves no half-written result file or folder (``atomic_file``, ``atomic_directory``).
* Nothing a user wrote is ever replaced: a run writes only to a path that is new, or that holds an
  earlier reconguard result of the same command. Every folder reconguard writes carries a marker
  (``.reconguard.json``: the command that wrote it); every file it writes is listed in its folder's
  marker. Anything else is refused with :class:`~reconguard.errors.OutputError` unless ``force``.
* One run at a time per output: :func:`claim_output` holds a lock file beside it for the whole run, so a
  second run into the same path is refused at once instead of silently replacing the first one's results.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .errors import OutputError
from .results import to_jsonable

MARKER = ".reconguard.json"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path`` (else removed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` (dataclasses, tensors allowed) as indented JSON, atomically."""
    return write_text_atomic(path, json.dumps(to_jsonable(obj), indent=2) + "\n")


def save_torch_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """``torch.save`` atomically; tensors, dicts, lists and numbers only, so it loads with ``weights_only=True``."""
    import torch

    with atomic_file(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)


def _marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _user_files(folder: Path) -> list[str]:
    """Entries of ``folder`` other than reconguard's marker (a few, for the message)."""
    return sorted(p.name for p in folder.iterdir() if p.name != MARKER)[:3]


def check_output(path: str | os.PathLike, command: str, *, kind: str = "dir", force: bool = False) -> Path:
    """Raise :class:`OutputError` unless ``command`` may write ``path`` (a folder, or a file when
    ``kind="file"``); see the module docstring. Also checks that the place is writable."""
    path = Path(path)
    if kind == "dir":
        if path.exists() and not path.is_dir():
            raise OutputError(f"--out {path} is an existing file, not a folder; give a new folder path.")
        if path.is_dir() and any(path.iterdir()) and not force:
            mark = _marker(path)
            if mark is None:
                raise OutputError(f"--out {path} already holds files reconguard did not write "
                                  f"({', '.join(_user_files(path))}…); choose a new folder, or pass --force to "
                                  "replace it whole.")
            if mark.get("command") != command:
                raise OutputError(f"--out {path} holds the results of `reconguard {mark.get('command')}`, not of "
                                  f"`reconguard {command}`; choose another folder, or pass --force to replace it.")
        target_parent = path.parent
    else:
        if path.is_dir():
            raise OutputError(f"--out {path} is a folder; give a file path.")
        if path.exists() and not force:
            mark = _marker(path.parent) or {}
            owner = (mark.get("files") or {}).get(path.name)
            if owner != command:
                what = (f"was written by `reconguard {owner}`" if owner else "was not written by reconguard")
                raise OutputError(f"{path} already exists and {what}; choose another --out, or pass --force to "
                                  "overwrite it.")
        target_parent = path.parent
    _check_writable(target_parent)
    return path


def _check_writable(folder: Path) -> None:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write into {probe}: it is read-only or not a folder; choose another --out.")


def mark_folder(folder: str | os.PathLike, command: str) -> None:
    """Write ``folder``'s marker: it holds the results of ``command``."""
    (Path(folder) / MARKER).write_text(json.dumps({"command": command}) + "\n", encoding="utf-8")


def record_file(path: str | os.PathLike, command: str) -> None:
    """List ``path`` in its folder's marker as written by ``command`` (so a rerun may overwrite it)."""
    path = Path(path)
    mark = _marker(path.parent) or {}
    files = dict(mark.get("files") or {})
    files[path.name] = command
    mark["files"] = files
    with contextlib.suppress(OSError):
        write_text_atomic(path.parent / MARKER, json.dumps(mark, indent=1) + "\n")


@contextlib.contextmanager
def claim_output(path: str | os.PathLike, command: str, *, kind: str = "dir", force: bool = False) -> Iterator[Path]:
    """Check ``path`` (``check_output``) and hold a lock beside it for the duration of the run: a second
    run into the same path, while this one is alive, is refused with :class:`OutputError`."""
    path = check_output(path, command, kind=kind, force=force)
    created = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    lock = path.parent / f".{path.name}.lock"
    for _ in range(2):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            pid = _lock_pid(lock)
            if pid is not None and _alive(pid):
                raise OutputError(f"another reconguard run (pid {pid}) is writing {path}; wait for it to finish, "
                                  "or choose another --out.") from None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)  # a stale lock: its run is gone
        except OSError as exc:
            raise OutputError(f"cannot write into {path.parent} ({exc.strerror}); choose another --out.") from None
    else:  # pragma: no cover — lost the race twice
        raise OutputError(f"another reconguard run is writing {path}; choose another --out.")
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        for folder in created:  # folders made only for this run's output, left empty by a failure
            with contextlib.suppress(OSError):
                folder.rmdir()


def _lock_pid(lock: Path) -> int | None:
    try:
        return int(lock.read_text().strip() or "0") or None
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike, command: str = "run", force: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` whole, with a marker
    naming ``command``.

    On any exception the temporary folder is removed and ``path`` is left as it was, so a
    failed run never leaves a partial ``runs/<name>/``. A ``path`` that holds files reconguard did
    not write is refused (``OutputError``) unless ``force``.
    """
    path = check_output(path, command, kind="dir", force=force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise OutputError(f"cannot write into {path.parent} ({exc.strerror}); choose another --out.") from None
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        mark_folder(tmp, command)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    try:
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
        os.replace(tmp, path)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not path.exists():
            with contextlib.suppress(OSError):
                os.replace(old, path)
        raise OutputError(f"cannot replace {path} ({exc.strerror}); it was left as it was. Choose another --out.") \
            from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
