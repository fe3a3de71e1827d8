"""Output files written atomically: a crash never leaves half a file, and no input is overwritten."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from planner.errors import PlannerError


def check_target(path: Path, protected: tuple[Path, ...] = ()) -> Path:
    """The folder `path` will be written in; refuses any of `protected` (the user's input
    files) and a folder that does not exist, before any work is spent on the output."""
    path = Path(path)
    for keep in protected:
        if path.exists() and Path(keep).exists() and path.resolve() == Path(keep).resolve():
            raise PlannerError("refusing to overwrite an input file; choose another output path", str(path))
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise PlannerError("the output folder does not exist", str(path))
    return directory


def write_atomic(path: Path, data: str | bytes, protected: tuple[Path, ...] = ()) -> None:
    """Write via a temporary file and rename, so a crash never leaves half a file.

    Refuses to overwrite any of `protected` (see `check_target`).
    """
    path = Path(path)
    directory = check_target(path, protected)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the output is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
