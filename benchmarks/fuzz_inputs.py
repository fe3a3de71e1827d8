"""Mutate the shipped example scenarios and quarter files and hold the CLI to its promise.

    python benchmarks/fuzz_inputs.py [--mutants N] [--seed S] [--command validate|solve]

Each mutant is one shipped example with one mutation (below); the promise is exit status 0, 1 or 2,
for 2 exactly one line on stderr that names the file, no traceback, and no hang (30 s). Prints a
line per broken promise and a summary. `tests/test_robustness.py` runs a fixed, quick budget of
the same mutations.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def drop_line(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    del lines[rng.randrange(len(lines))]
    return "".join(lines)


def _replace_value(text: str, rng: random.Random, values: list[str]) -> str:
    lines = _lines(text)
    keyed = [
        i
        for i, line in enumerate(lines)
        if re.match(r"^\s*-?\s*[A-Za-z_]+:\s*\S", line)
    ]
    if not keyed:
        return text
    i = rng.choice(keyed)
    key, _, _ = lines[i].partition(":")
    lines[i] = f"{key}: {rng.choice(values)}\n"
    return "".join(lines)


def wrong_type(text: str, rng: random.Random) -> str:
    return _replace_value(
        text, rng, ["[1, 2]", "{a: 1}", "true", "null", "'text'", "-1", "0", "3.5"]
    )


def extreme_number(text: str, rng: random.Random) -> str:
    return _replace_value(
        text,
        rng,
        [
            "1e308",
            "-1e308",
            ".inf",
            ".nan",
            "1e-320",
            "99999999999999999999",
            "0x7fffffffffffffff",
            "1e309",
        ],
    )


def control_characters(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text))
    return (
        text[:at]
        + rng.choice(["\x00", "\x01", "\x1b[31m", "\u2028", "\ufeff", "\t", "\r"])
        + text[at:]
    )


def deep_nesting(text: str, rng: random.Random) -> str:
    depth = rng.choice([100, 1000, 5000])
    return _replace_value(
        text, rng, ["[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth]
    )


def truncate(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(1, len(text))]


def duplicate_block(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    j = min(len(lines), i + rng.randrange(1, 12))
    return "".join(lines[:j] + lines[i:j] + lines[j:])


def aliases(text: str, rng: random.Random) -> str:
    lines = _lines(text)
    i = rng.randrange(1, len(lines))
    return "".join(lines[:i]) + "x: &a [1, 2]\ny: *a\nz: *b\n" + "".join(lines[i:])


def odd_dates(text: str, rng: random.Random) -> str:
    return re.sub(
        r"20\d\d-\d\d-\d\d",
        lambda _: rng.choice(
            ["2027-02-30", "1900-01-01", "9999-12-31", "2027-13-01", "yesterday"]
        ),
        text,
        count=rng.randint(1, 3),
    )


def cycle_after(text: str, rng: random.Random) -> str:
    names = re.findall(r"- name: ([\w-]+)", text)
    if len(names) < 2:
        return text
    a, b = rng.sample(names, 2)
    return text.replace(
        f"- name: {a}\n", f"- name: {a}\n    after: [{b}]\n", 1
    ).replace(f"- name: {b}\n", f"- name: {b}\n    after: [{a}]\n", 1)


def swap_units(text: str, rng: random.Random) -> str:
    return re.sub(
        r"\b(\d+)(h|d|GiB|TiB|B|M|k)\b",
        lambda m: m.group(1) + rng.choice(["x", "hh", "", "GB", "-", "%"]),
        text,
        count=rng.randint(1, 4),
    )


ODD_NAMES = [
    '"\\e]0;pwned-title\\aesc"',
    '"two\\nlines"',
    "\"=HYPERLINK('http://x.example')\"",
    '"+cmd"',
    '"@SUM(A1)"',
    '"-2+3"',
    '"run-${DATE}_${USER}"',
    '"cost $5_$10"',
    '"sft_$VERSION_$SUFFIX"',
    '"\\x07bell"',
]
"""Names people write, or paste: escape sequences, spreadsheet formulas, shell and mathtext dollars."""


def odd_names(text: str, rng: random.Random) -> str:
    names = re.findall(r"- name: ([\w-]+)", text)
    if not names:
        return text
    return text.replace(
        f"- name: {rng.choice(names)}\n", f"- name: {rng.choice(ODD_NAMES)}\n", 1
    )


def endpoint_copies(text: str, rng: random.Random) -> str:
    """An endpoint (or job) block repeated under new names: many identical workloads."""
    blocks = re.split(r"(?m)^(?=  - name: )", text)
    if len(blocks) < 2:
        return text
    block = rng.choice(blocks[1:])
    name = re.match(r"  - name: (\S+)", block).group(1)
    copies = [
        block.replace(f"- name: {name}", f"- name: {name}-copy{k}", 1)
        for k in range(rng.choice([2, 20, 200]))
    ]
    i = blocks.index(block)
    return "".join(blocks[: i + 1] + copies + blocks[i + 1 :])


MUTATIONS = {
    f.__name__: f
    for f in (
        drop_line,
        wrong_type,
        extreme_number,
        control_characters,
        deep_nesting,
        truncate,
        duplicate_block,
        aliases,
        odd_dates,
        cycle_after,
        swap_units,
        odd_names,
        endpoint_copies,
    )
}


def mutate(data: bytes, mutation: str, seed: int) -> bytes:
    """One mutation of a file's bytes, reproducible from (mutation, seed)."""
    rng = random.Random(seed)
    text = data.decode("utf-8")
    return MUTATIONS[mutation](text, rng).encode("utf-8", "surrogatepass")


def check(command: str, path: Path) -> str | None:
    """None when the promise holds, else what broke."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "planner.cli", command, str(path)]
            + (["--time-limit", "5"] if command == "solve" else []),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        return "hung for more than 30 s"
    lines = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not line.startswith("warning: ")
    ]
    if "Traceback" in done.stderr:
        return "traceback: " + done.stderr.strip().splitlines()[-1]
    if done.returncode not in (0, 1, 2):
        return f"exit status {done.returncode}"
    if done.returncode == 2 and (len(lines) != 1 or str(path) not in lines[0]):
        return f"{len(lines)} error lines: {' | '.join(lines)[:200]}"
    if time.perf_counter() - started > 30:
        return "slow"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--command", choices=("validate", "solve"), default="validate")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    examples = sorted(SCENARIOS.glob("*.yaml"))
    broken, started = 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "catalogs").mkdir()
        for extra in (SCENARIOS / "catalogs").glob("*.csv"):
            (folder / "catalogs" / extra.name).write_bytes(extra.read_bytes())
        for i in range(args.mutants):
            example, mutation, seed = (
                rng.choice(examples),
                rng.choice(sorted(MUTATIONS)),
                rng.randrange(10**6),
            )
            path = folder / f"{i:04d}-{example.name}"
            path.write_bytes(mutate(example.read_bytes(), mutation, seed))
            problem = check(args.command, path)
            if problem:
                broken += 1
                print(f"{example.name} {mutation} seed {seed}: {problem}")
    print(
        f"{args.mutants} mutants, {broken} broke the promise, {time.perf_counter() - started:.0f} s "
        f"({args.command})"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
