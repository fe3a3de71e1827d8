"""The shipped example scenarios and quarter files, copied where a user can edit them.

A wheel (or pipx) install has no checkout to read `scenarios/` from; `planner examples`
puts the same files in a folder of the user's, with the catalogs and calibrations they name next to them.
Files already there are never overwritten: the user may have edited them.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import PlannerError
from planner.files import write_atomic
from planner.load.catalog import EXAMPLES_DIR


def shipped_examples() -> dict[str, str]:
    """Example file name -> its first comment line (what it shows)."""
    out = {}
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        first = next(
            (
                line
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            ),
            "",
        )
        out[path.name] = first.lstrip("# ").strip()
    return out


def copy_examples(
    destination: Path, names: tuple[str, ...] = ()
) -> tuple[list[Path], list[Path]]:
    """Copy the named examples (all when none are named) and the offer files they use into
    `destination`; returns (written, kept because they already existed)."""
    known = shipped_examples()
    unknown = [n for n in names if n not in known and f"{n}.yaml" not in known]
    if unknown:
        from planner.errors import did_you_mean

        raise PlannerError(
            f"no shipped example {unknown[0]!r}{did_you_mean(unknown[0], known)}",
            "NAMES",
        )
    chosen = [n if n in known else f"{n}.yaml" for n in names] or list(known)
    files = (
        [EXAMPLES_DIR / n for n in chosen]
        + sorted((EXAMPLES_DIR / "catalogs").glob("*.csv"))
        + sorted((EXAMPLES_DIR / "calibrations").glob("*.yaml"))
    )
    make_folder(destination)
    written, kept = [], []
    for source in files:
        target = destination / source.relative_to(EXAMPLES_DIR)
        if target.exists():
            kept.append(target)
            continue
        make_folder(target.parent)
        write_atomic(target, source.read_bytes())
        written.append(target)
    return written, kept


def make_folder(folder: Path) -> None:
    """Create `folder` (and its parents); one located line when it cannot be (no permission, /proc, a file there)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlannerError(
            f"cannot make the folder: {exc.strerror or exc}", str(folder)
        ) from None
