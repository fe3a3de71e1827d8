"""Output files written atomically: a crash never leaves half a file, and no input is overwritten."""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from planner.errors import PlannerError


def _resolved(path: Path, protected: tuple[Path, ...]) -> tuple[int | None, Path, Path]:
    """(the file type of what `path` names now, None if nothing; the file to replace, a symlink's target; its
    folder), refusing any of `protected` (the user's input files), a folder, and a folder that does not exist."""
    kind = _kind(path)
    for keep in protected:
        if kind is not None and Path(keep).exists() and os.path.samefile(path, keep):
            raise PlannerError("refusing to overwrite an input file; choose another output path", str(path))
    if kind is not None and stat.S_ISDIR(kind):
        raise PlannerError("is a folder; expected a file name", str(path))
    target = path.resolve() if path.is_symlink() else path
    directory = target.parent if str(target.parent) else Path(".")
    if (kind is None or stat.S_ISREG(kind)) and not directory.is_dir():  # (a device or FIFO is written into)
        raise PlannerError("the output folder does not exist", str(path))
    return kind, target, directory


def check_target(path: Path, protected: tuple[Path, ...] = ()) -> Path:
    """The folder `path` will be written in; refuses any of `protected` (the user's input
    files), a folder, and a folder that does not exist or takes no new file, before any work
    is spent on the output."""
    path = Path(path)
    kind, target, directory = _resolved(path, protected)
    if kind is not None and not stat.S_ISREG(kind):
        return path.parent  # a device or a FIFO is written into directly
    try:  # the one sure test that the folder takes the temporary file (permissions, /proc, a long name)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(target), suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise _cannot_write(exc, path) from None
    return directory


def same_target(path: Path, other: Path) -> bool:
    """Whether two output paths name one regular file (or one yet to be made); a device or FIFO, which is
    written into rather than replaced, may take several outputs."""
    kind = _kind(path)
    if kind is not None and not stat.S_ISREG(kind):
        return False
    if os.path.realpath(path) == os.path.realpath(other):
        return True
    return kind is not None and _kind(other) is not None and os.path.samefile(path, other)


def write_atomic(path: Path, data: str | bytes, protected: tuple[Path, ...] = ()) -> None:
    """Write via a temporary file and rename, so a crash never leaves half a file.

    Refuses to overwrite any of `protected` (see `check_target`; its checks that the folder takes a file are
    the temporary file's own here). A symlink keeps pointing where it did (its target is replaced); a device
    or FIFO (`-o /dev/stdout`) is written into, never renamed over.
    """
    path = Path(path)
    kind, target, directory = _resolved(path, protected)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if kind is not None and not stat.S_ISREG(kind):
        try:
            with open(path, "wb") as handle:
                handle.write(payload)
        except OSError as exc:
            raise _cannot_write(exc, path) from None
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(target), suffix=".tmp")
    except OSError as exc:
        raise _cannot_write(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the output is an ordinary file
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _cannot_write(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _kind(path: Path) -> int | None:
    """The file type bits of what `path` names after following links, or None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _cannot_write(exc, path) from None


def _temp_prefix(path: Path) -> str:
    return f".{path.name[:100]}."  # a name near the folder's limit still leaves room for the temporary one


def _cannot_write(exc: OSError, path: Path) -> PlannerError:
    return PlannerError(f"cannot write the output file: {exc.strerror or exc}", str(path))
