"""Atomic writes, and the rules for where a run may write.

* A failed run leaves no half-written result file or folder (``atomic_file``, ``atomic_directory``).
* The output layer can only delete what it wrote. Every folder reconguard writes carries a marker
  (``.reconguard.json``: the command that wrote it) that lists every file it wrote there, with its size, time
  and SHA-256 as written; a listed file the user has changed since is the user's. Replacing a result replaces
  or removes listed, unchanged files only (:func:`atomic_directory` merges file by file, :func:`remove_owned`
  removes a listed file or a marked folder's listed files). Any other file is the user's: never
  replaced, never removed, with or without ``force`` (``force`` only lets a run write beside such files, or
  over another command's listed results). ``$HOME``, ``/``, the working directory and the folders above it are
  never an output folder. Locks, units folders and checkpoints carry the marker (or the lock's own format), so
  a user's file at their path is refused, never deleted. Nothing else in reconguard deletes a user path; the
  only recursive delete (:func:`discard_tmp`) takes a temporary folder this process just made.
* One run at a time per output: :func:`claim_output` holds a lock file beside it for the whole run, so a
  second run into the same path is refused at once instead of silently replacing the first one's results.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from .errors import OutputError
from .results import to_jsonable

MARKER = ".reconguard.json"
LOCK_TAG = "reconguard-lock"


def _umask() -> int:
    os.umask(mask := os.umask(0))
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


def save_torch_atomic(path: str | os.PathLike, obj: Any, record: str | None = None) -> Path:
    """``torch.save`` atomically; tensors, dicts, lists and numbers only (it loads with ``weights_only=True``). ``record``:
    listed in the marker as that command's before the save (a kill mid-save leaves it the run's) and after, digested."""
    import torch

    if record:
        record_file(path, record, written=False)
    with atomic_file(path) as tmp:
        torch.save(obj, tmp)
    if record:
        record_file(path, record)
    return Path(path)


def _marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _user_files(folder: Path) -> list[str]:
    """Entries of ``folder`` that its marker does not list (a few, for the message)."""
    listed = set(_listed(folder))

    def ours(p: Path) -> bool:  # a listed file, or a sub-folder whose every file is listed
        if p.name in listed:
            return True
        return p.is_dir() and not p.is_symlink() and all(
            q.relative_to(folder).as_posix() in listed for q in p.rglob("*") if not q.is_dir())

    return sorted(p.name for p in folder.iterdir() if p.name != MARKER and not ours(p))[:3]


def _digest(path: Path) -> dict | None:
    """What identifies a file's content as written: size, modification time (ns) and SHA-256; None if absent."""
    try:
        st = path.stat()
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": h.hexdigest()}


def _unchanged(path: Path, recorded) -> bool:
    """Whether ``path`` still holds what reconguard wrote: the same size and time, or SHA-256 (a copy that kept the
    bytes); no digest (an earlier version's marker, a write in progress) or no file counts as unchanged."""
    try:
        st = path.stat()
    except OSError:
        return True  # nothing there to lose
    if not isinstance(recorded, dict) or (st.st_size, st.st_mtime_ns) == (recorded.get("size"), recorded.get("mtime_ns")):
        return True
    now = _digest(path) if st.st_size == recorded.get("size") else None
    return now is not None and now["sha256"] == recorded.get("sha256")


def _recorded(folder: Path) -> tuple[dict, dict]:
    """``({relative path: command}, {relative path: digest})`` as ``folder``'s marker lists them."""
    mark = _marker(folder) or {}
    files, digests = mark.get("files"), mark.get("digests")
    files = {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    return files, (digests if isinstance(digests, dict) else {})


def _listed(folder: Path) -> dict:
    """``{relative path: command}`` of reconguard's own files in ``folder``: listed in its marker and unchanged since
    written (a listed file the user has edited since is the user's)."""
    files, digests = _recorded(folder)
    return {k: v for k, v in files.items() if _unchanged(folder / k, digests.get(k))}


def _not_ours(path: Path) -> str:
    """Why ``path`` is not reconguard's to replace, for a message: listed but changed since written, or never listed."""
    files, digests = _recorded(path.parent)
    changed = path.name in files and not _unchanged(path, digests.get(path.name))
    return "was changed since reconguard wrote it (yours now)" if changed else "was not written by reconguard"


def owner(path: str | os.PathLike) -> str | None:
    """The command that wrote ``path`` (its folder's marker); None when reconguard did not, or it was changed since."""
    path = Path(path)
    return _listed(path.parent).get(path.name)


def _refuse_protected(path: Path) -> None:
    """``$HOME``, ``/``, the working directory and any folder above it are never an output folder."""
    try:
        target = path.expanduser().resolve()
    except (OSError, RuntimeError):
        return
    cwd = Path.cwd().resolve()
    protected = {Path("/"), Path.home().resolve(), cwd, *cwd.parents}
    if target in protected:
        what = ("your home folder" if target == Path.home().resolve() else "the root folder" if target == Path("/")
                else "the working folder or a folder above it")
        raise OutputError(f"--out {path} is {what}: reconguard never writes its results there; give a new folder, "
                          "e.g. --out runs/mine.")


def check_output(path: str | os.PathLike, command: str, *, kind: str = "dir", force: bool = False) -> Path:
    """Raise :class:`OutputError` unless ``command`` may write ``path`` (a folder, or a file when
    ``kind="file"``); see the module docstring. Also checks that the place is writable."""
    path = Path(path)
    if kind == "dir":
        _refuse_protected(path)
        if path.exists() and not path.is_dir():
            raise OutputError(f"--out {path} is an existing file, not a folder; give a new folder path.")
        if path.is_dir() and any(path.iterdir()) and not force:
            mark = _marker(path)
            if mark is None or _user_files(path):
                raise OutputError(f"--out {path} already holds files reconguard did not write, or changed after it "
                                  f"wrote them ({', '.join(_user_files(path))}…); choose a new folder, or pass --force to "
                                  "write beside them (they are kept: reconguard never removes a file it did not "
                                  "write).")
            if mark.get("command") != command:
                raise OutputError(f"--out {path} holds the results of `reconguard {mark.get('command')}`, not of "
                                  f"`reconguard {command}`; choose another folder, or pass --force to replace them.")
    else:
        if path.is_dir():
            raise OutputError(f"--out {path} is a folder; give a file path.")
        if path.exists() or path.is_symlink():
            who = owner(path)
            if who is None:
                raise OutputError(f"{path} already exists and {_not_ours(path)}; choose another --out "
                                  "(reconguard never overwrites a file it did not write, even with --force).")
            if who != command and not force:
                raise OutputError(f"{path} already exists and was written by `reconguard {who}`; choose another "
                                  "--out, or pass --force to overwrite it.")
    _check_writable(path.parent)
    return path


def _check_writable(folder: Path) -> None:
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write into {probe}: it is read-only or not a folder; choose another --out.")


def mark_folder(folder: str | os.PathLike, command: str, files=(), **extra) -> None:
    """Write ``folder``'s marker: it holds the results of ``command``, and ``files`` (relative paths) are its own, as
    they are now (their digests)."""
    folder = Path(folder)
    digests = {str(f): d for f in files if (d := _digest(folder / f)) is not None}
    mark = {"command": command, "files": {str(f): command for f in files}, "digests": digests, **extra}
    write_text_atomic(folder / MARKER, json.dumps(mark, indent=1) + "\n")


def record_file(path: str | os.PathLike, command: str, *, written: bool = True) -> None:
    """List ``path`` in its folder's marker as written by ``command`` (so a rerun may overwrite it), with its digest
    as it is now; ``written=False`` lists it before it is written (a write in progress: no digest yet)."""
    path = Path(path)
    mark = _marker(path.parent) or {}
    files, digests = dict(mark.get("files") or {}), dict(mark.get("digests") or {})
    files[path.name] = command
    digests.pop(path.name, None)
    if written and (digest := _digest(path)) is not None:
        digests[path.name] = digest
    mark["files"], mark["digests"] = files, digests
    write_text_atomic(path.parent / MARKER, json.dumps(mark, indent=1) + "\n")


def _forget(folder: Path, names) -> None:
    mark = _marker(folder)
    if mark is None:
        return
    for key in ("files", "digests"):
        mark[key] = {k: v for k, v in (mark.get(key) or {}).items() if k not in set(names)}
    write_text_atomic(folder / MARKER, json.dumps(mark, indent=1) + "\n")


def remove_owned(path: str | os.PathLike) -> None:
    """Remove what reconguard wrote at ``path`` and nothing else: a file listed in its folder's marker, or the
    listed files of a marked folder (then its marker, and the folder if that left it empty). A path reconguard did
    not write is refused (``OutputError``), never removed."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        if owner(path) is None:
            raise OutputError(f"{path} is in the way and {_not_ours(path)}; move it, or choose another --out.")
        path.unlink()
        _forget(path.parent, [path.name])
        return
    if not path.is_dir():
        return
    if _marker(path) is None:
        raise OutputError(f"{path} is in the way and was not written by reconguard; move it, or choose "
                          "another --out.")
    root = path.resolve()
    for rel in _listed(path):
        target = path / rel
        inside = root in (target.parent.resolve(), *target.parent.resolve().parents)  # a marker never points out
        if inside and (target.is_file() or target.is_symlink()):
            target.unlink()
    (path / MARKER).unlink(missing_ok=True)
    _remove_empty_dirs(path)


def _remove_empty_dirs(folder: Path) -> None:
    """Remove ``folder`` and its sub-folders where they are empty (``rmdir`` never removes content)."""
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir() and not p.is_symlink()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            sub.rmdir()
    with contextlib.suppress(OSError):
        folder.rmdir()


def discard_tmp(tmp: Path) -> None:
    """Remove a temporary folder this process made with ``mkdtemp`` (its name starts with a dot and ends in
    ``.tmp``): the only recursive delete in reconguard."""
    tmp = Path(tmp)
    if not (tmp.name.startswith(".") and tmp.name.endswith(".tmp")):
        raise RuntimeError(f"internal: discard_tmp({tmp}) is not a reconguard temporary folder")
    shutil.rmtree(tmp, ignore_errors=True)


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
            if pid is None:
                raise OutputError(f"{lock} is in the way and is not a reconguard lock; move it, or choose another "
                                  "--out.") from None
            if _alive(pid):
                raise OutputError(f"another reconguard run (pid {pid}) is writing {path}; wait for it to finish, "
                                  "or choose another --out.") from None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)  # a stale reconguard lock (its own format): its run is gone
        except OSError as exc:
            raise OutputError(f"cannot write into {path.parent} ({exc.strerror}); choose another --out.") from None
    else:  # pragma: no cover — lost the race twice
        raise OutputError(f"another reconguard run is writing {path}; choose another --out.")
    try:
        os.write(fd, f"{LOCK_TAG} {os.getpid()}\n".encode())
        os.close(fd)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            if _lock_pid(lock) == os.getpid():
                os.unlink(lock)
        for folder in created:  # folders made only for this run's output, left empty by a failure
            with contextlib.suppress(OSError):
                folder.rmdir()


def _lock_pid(lock: Path) -> int | None:
    """The pid in a reconguard lock (``reconguard-lock PID``); None for anything else."""
    try:
        tag, pid = lock.read_text(encoding="utf-8", errors="replace").split()
        return int(pid) if tag == LOCK_TAG and int(pid) > 0 else None
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
    """Yield a temporary folder beside ``path``; on success its files move into ``path``, listed in its marker.

    A new (or empty) ``path`` is replaced by the temporary folder in one rename. An earlier result is merged file
    by file: this run's files replace the listed ones of the same name, listed files this run did not write are
    removed, and every file the marker does not list (the user's) stays as it is — a name clash with one is
    refused before anything moves. On any exception the temporary folder is removed and ``path`` is left as it was,
    so a failed run never leaves a partial ``runs/<name>/``.
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
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*")
                       if (p.is_file() or p.is_symlink()) and p.name != MARKER)
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            mark_folder(tmp, command, files)
            os.replace(tmp, path)
            return
        _merge(tmp, path, files, command)
    except BaseException:
        discard_tmp(tmp)
        raise
    discard_tmp(tmp)


def _merge(tmp: Path, path: Path, files: list[str], command: str) -> None:
    """Move ``files`` from ``tmp`` into the result folder ``path`` (see :func:`atomic_directory`)."""
    old = _listed(path)
    clash = [f for f in files if ((path / f).exists() or (path / f).is_symlink()) and f not in old]
    if clash:
        raise OutputError(f"{path / clash[0]} is in the way: it {_not_ours(path / clash[0])}, and reconguard never "
                          "replaces it; move it, or choose another --out. Nothing was written.")
    try:
        for f in files:
            (path / f).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / f, path / f)
    except OSError as exc:
        raise OutputError(f"cannot write into {path} ({exc.strerror}); choose another --out.") from None
    root = path.resolve()
    for f in set(old) - set(files):  # this command's earlier files that this run did not write
        target = path / f
        if root in (target.parent.resolve(), *target.parent.resolve().parents) and target.is_file():
            target.unlink()
    mark_folder(path, command, files)
