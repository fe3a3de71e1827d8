"""Write the published-runs tables of docs/validation.md and docs/recipes.md from benchmarks/published.py, and
the serving table of docs/validation.md from benchmarks/serving_published.py.

    python tools/validation_docs.py [--check]

docs/validation.md gets the whole table (`python benchmarks/published.py --markdown`) and its summary
line; docs/recipes.md the fine-tuning and efficiency cases with the reason for every miss. Both are
rewritten between their `<!-- published:begin -->` and `<!-- published:end -->` markers only (the serving
table between `<!-- serving:begin -->` and `<!-- serving:end -->`), atomically.
Run it from the repository root after a change that moves a figure; `--check` only says which differ.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.files import write_atomic  # noqa: E402

BEGIN, END = "<!-- published:begin -->", "<!-- published:end -->"
SERVING = ("<!-- serving:begin -->", "<!-- serving:end -->")
# the cases docs/recipes.md shows: fine-tuning runs, and the throughput runs that set the efficiency table
RECIPE_CASES = re.compile(
    r"\| (torchtune|answerai|automodel|nemo2407|unsloth|foundry|fms-fsdp|hf-fa2|litgpt|qlora-"
    r"|peft|falcon-180b-(lora|qlora|full))"
)


def published_table(script: str = "published.py") -> list[str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--markdown"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def serving_block(lines: list[str]) -> str:
    return (
        f"Real output of `python benchmarks/serving_published.py --markdown`, {date.today().isoformat()}:\n\n"
        + "\n".join(lines[:-1])
        + "\n\n"
        + lines[-1]
        + "\n"
    )


def validation_block(lines: list[str]) -> str:
    return (
        f"Real output of `python benchmarks/published.py --markdown`, {date.today().isoformat()}:\n\n"
        + "\n".join(lines[:-1])
        + "\n\n"
        + lines[-1]
        + "\n"
    )


def recipes_block(lines: list[str]) -> str:
    header, rows = lines[:2], [line for line in lines[2:-1] if RECIPE_CASES.match(line)]
    reasons = []
    for row in rows:
        case, note = row.split(" | ")[0].lstrip("| "), row.rsplit(" | ", 1)[-1]
        if "; miss: " in note:
            reasons.append(f"- `{case}`: {note.split('; miss: ', 1)[1].rstrip(' |')}")
    rows = [re.sub(r"; miss: [^|]*\|$", " |", row) for row in rows]
    return (
        "\n".join(header + rows)
        + "\n\nWhy the misses miss:\n\n"
        + "\n".join(reasons)
        + "\n"
    )


def rewrite(
    path: Path, block: str, check: bool, markers: tuple[str, str] = (BEGIN, END)
) -> bool:
    text = path.read_text()
    start, end = text.index(markers[0]) + len(markers[0]), text.index(markers[1])
    updated = text[:start] + "\n" + block + text[end:]
    if updated != text and not check:
        write_atomic(path, updated)
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    lines = published_table()
    blocks = (
        ("docs/validation.md", validation_block(lines), (BEGIN, END)),
        ("docs/recipes.md", recipes_block(lines), (BEGIN, END)),
        (
            "docs/validation.md",
            serving_block(published_table("serving_published.py")),
            SERVING,
        ),
    )
    differ = sorted(
        {
            name
            for name, block, markers in blocks
            if rewrite(ROOT / name, block, args.check, markers)
        }
    )
    for name in differ:
        print(("differs: " if args.check else "updated: ") + name)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
