"""Output files written atomically: a crash never leaves half a file, and no input is overwritten."""

from __future__ import annotations

import contextlib
import contextvars
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
            raise PlannerError(
                "refusing to overwrite an input file; choose another output path",
                str(path),
            )
    if kind is not None and stat.S_ISDIR(kind):
        raise PlannerError("is a folder; expected a file name", str(path))
    target = path.resolve() if path.is_symlink() else path
    directory = target.parent if str(target.parent) else Path(".")
    if (
        kind is None or stat.S_ISREG(kind)
    ) and not directory.is_dir():  # (a device or FIFO is written into)
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
        fd, probe = tempfile.mkstemp(
            dir=directory, prefix=_temp_prefix(target), suffix=".tmp"
        )
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
    return (
        kind is not None and _kind(other) is not None and os.path.samefile(path, other)
    )


def write_atomic(
    path: Path, data: str | bytes, protected: tuple[Path, ...] = ()
) -> None:
    """Write via a temporary file (synced) and rename, so a crash never leaves half a file; inside
    `outputs_together`, the rename waits for the command's other outputs.

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
    _remove_stale(directory, target)
    try:
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=_temp_prefix(target), suffix=".tmp"
        )
    except OSError as exc:
        raise _cannot_write(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            # the data is on disk before the rename makes it the file
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        # mkstemp makes 0600; the output is an ordinary file
        os.chmod(tmp, 0o666 & ~umask)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _cannot_write(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    staged = _staging.get()
    if staged is not None:
        staged.append((Path(tmp), target, path))
    else:
        _rename([(Path(tmp), target, path)])


_staging: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "staging", default=None
)


@contextlib.contextmanager
def outputs_together():
    """A command's output files land as a set: each `write_atomic` inside leaves its synced temporary file, and
    all are renamed into place when the block ends without error; an error or interrupt inside removes them all,
    so no new `out.csv` sits beside the previous run's `g.png`."""
    staged: list = []
    token = _staging.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    finally:
        _staging.reset(token)
    _rename(staged)


def _rename(staged: list) -> None:
    """Each temporary file over its target, then the folders synced so the renames survive a power cut."""
    try:
        for tmp, target, path in staged:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise _cannot_write(exc, path) from None
    finally:
        for tmp, _, _ in staged:
            tmp.unlink(missing_ok=True)  # those not renamed (an error above)
    for directory in {target.parent for _, target, _ in staged}:
        with contextlib.suppress(OSError):
            fd = os.open(directory or ".", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _remove_stale(directory: Path, target: Path) -> None:
    """Temporary files of `target` left by a planner process that no longer runs (killed in its write window):
    named `.NAME.PID.XXXX.tmp`, they are found and removed by the next write of the same file."""
    prefix = f".{target.name[:100]}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            name = entry.name
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            pid = name[len(prefix) :].split(".", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


def _kind(path: Path) -> int | None:
    """The file type bits of what `path` names after following links, or None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _cannot_write(exc, path) from None


def _temp_prefix(path: Path) -> str:
    """`.NAME.PID.`: a name near the folder's limit still leaves room for the temporary one, and the process id
    tells the next write whether the file's writer still runs (`_remove_stale`)."""
    return f".{path.name[:100]}.{os.getpid()}."


def _cannot_write(exc: OSError, path: Path) -> PlannerError:
    return PlannerError(
        f"cannot write the output file: {exc.strerror or exc}", str(path)
    )
