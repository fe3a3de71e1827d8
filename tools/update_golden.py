"""Write tests/golden/<example>.json: what every shipped example plans, for tests/test_golden.py.

    python tools/update_golden.py [NAMES...]

Each shipped example (`planner examples --list`) goes through the command a user would run on
it: a scenario through `planner solve FILE --format json --no-timings`, a quarter file (one with
`horizon:` and `runs:` keys) through `planner batch FILE --format json --no-timings`, each with
its default time limit and workers (the plan may depend on them). The command's JSON output is
written as is, atomically. Run it from the repository root after a change that is meant to move a
plan, then read the diff of tests/golden/ before keeping it. NAMES (stems or file names) limit it
to those examples.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from click.testing import CliRunner

from planner.cli import main as planner_main
from planner.files import write_atomic
from planner.load.catalog import EXAMPLES_DIR
from planner.load.examples import shipped_examples
from planner.load.yaml import load_yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = ROOT / "tests" / "golden"
OK_EXITS = (0, 1)
"""`planner solve`/`batch` exit 0 with a plan and 1 when infeasible; both print the JSON report."""


def is_quarter(path: Path) -> bool:
    """A quarter file (`planner batch`) has a `horizon:` and a `runs:` key; a scenario has neither."""
    data = load_yaml(path)
    return isinstance(data, dict) and "horizon" in data and "runs" in data


def examples() -> list[Path]:
    """The shipped example files, in name order."""
    return [EXAMPLES_DIR / name for name in sorted(shipped_examples())]


def command(path: Path) -> list[str]:
    """The `planner` arguments (without `planner`) whose JSON output is the golden file of `path`."""
    return [
        "batch" if is_quarter(path) else "solve",
        str(path),
        "--format",
        "json",
        "--no-timings",
    ]


def invoke(path: Path):
    """`planner` run in this process on `path` (click's CliRunner): the result, with stderr apart.

    The CLI ignores Ctrl-C once a command has finished (so it cannot break the interpreter's
    shutdown); that would outlive the command here, so the caller's SIGINT handler is put back."""
    handler = signal.getsignal(signal.SIGINT)
    try:
        return CliRunner().invoke(planner_main, command(path), catch_exceptions=False)
    finally:
        signal.signal(signal.SIGINT, handler)


def run(path: Path) -> str:
    """The JSON text `planner` prints for `path`; raises if it did not print a JSON report."""
    result = invoke(path)
    if result.exit_code not in OK_EXITS:
        raise RuntimeError(
            f"planner {' '.join(command(path))} exited {result.exit_code}:\n{result.stderr}"
        )
    json.loads(result.stdout)  # a report, not an error message
    return result.stdout


def golden_path(path: Path) -> Path:
    return GOLDEN_DIR / f"{path.stem}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help="only these examples (stem or file name)"
    )
    args = parser.parse_args(argv)
    if os.environ.get("PLANNER_CATALOG_DIR"):
        parser.error(
            "PLANNER_CATALOG_DIR is set: the golden plans are made on the shipped catalogs; unset it"
        )
    chosen = examples()
    if args.names:
        wanted = {Path(n).stem for n in args.names}
        unknown = wanted - {p.stem for p in chosen}
        if unknown:
            parser.error(f"no shipped example {min(unknown)!r}")
        chosen = [p for p in chosen if p.stem in wanted]
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for path in chosen:
        target = golden_path(path)
        write_atomic(target, run(path))
        print(
            f"wrote {target.relative_to(ROOT)} (planner {command(path)[0]} {path.name})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
