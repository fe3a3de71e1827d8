"""Re-run every `$ planner ...` example in README.md and the documentation (docs/*.md) and put its real output
back in place.

    python tools/readme_examples.py [--check] [--only TEXT ...]

Then `python tools/reference_docs.py` copies the README to the site's home page.

A block that was trimmed (it holds a `…` line) keeps only the table rows whose first cell the
old block showed, with the `…` lines where they were. `--check` only reports which blocks differ;
`--only` re-runs only the blocks whose command contains one of the texts.
Run it from the repository root after a change that moves a figure; the README must stay true.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```\n\$ (planner [^\n]+)\n(.*?)```", re.S)


def run(command: str) -> str:
    env = {**os.environ, "COLUMNS": "240"}
    done = subprocess.run(
        [sys.executable, "-m", "planner.cli", *shlex.split(command)[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [
        line.rstrip()
        for line in (
            done.stdout
            + "".join(
                line + "\n"
                for line in done.stderr.splitlines()
                if line.startswith("wrote ")
            )
        ).splitlines()
    ]
    return "\n".join(lines) + "\n"


def trimmed(new: str, old: str) -> str:
    """Keep the rows of `new` whose first cell `old` showed, and `…` where `old` had it."""
    shown = {line.split("│")[0].strip() for line in old.splitlines() if "│" in line}
    out, skipped = [], False
    for line in new.splitlines():
        if "│" in line and line.split("│")[0].strip() not in shown:
            if not skipped:
                out.append("…")
            skipped = True
            continue
        skipped = False
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT")
    args = parser.parse_args(argv)
    changed, stale = [], []

    def replace(match: re.Match) -> str:
        command, old = match.group(1), match.group(2)
        words = shlex.split(command)
        # the inputs it names (a file it writes, after -o or --fit, need not exist yet)
        files = [
            a
            for before, a in zip([""] + words, words)
            if a.endswith(".yaml") and before not in ("-o", "--output", "--fit")
        ]
        if (
            not all((ROOT / f).exists() for f in files)
            or args.only
            and not any(t in command for t in args.only)
        ):
            # an illustration of an error (broken.yaml), or not asked for: kept as written
            return match.group(0)
        new = run(command)
        if "…" in old:
            new = trimmed(new, old)
        if new != old:
            changed.append(command)
        return f"```\n$ {command}\n{new}```"

    for page in example_pages():
        text = page.read_text()
        updated = BLOCK.sub(replace, text)
        for command in changed:
            print(
                ("differs: " if args.check else "updated: ")
                + f"{page.relative_to(ROOT)}: {command}"
            )
        changed.clear()
        if updated != text:
            stale.append(page)
            if not args.check:
                page.write_text(updated)
    return 1 if args.check and stale else 0


def example_pages() -> list[Path]:
    """The README and the documentation's pages that people write (not those generated from the code)."""
    return [ROOT / "README.md"] + sorted(
        p for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"
    )


if __name__ == "__main__":
    sys.exit(main())
