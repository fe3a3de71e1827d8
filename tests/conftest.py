"""Shared test helpers: write a scenario to a temp file and run the CLI on it."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from planner.cli import main

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"

# Tables render as they do into a pipe or a file (240 columns), whatever terminal the test runner (or a
# pytest-xdist worker) happens to hold; the commands' own width rule is tested where it matters.
os.environ["COLUMNS"] = str(240)
# No team planner.toml of the machine's (a user-level one, or one above the checkout) reaches a test;
# tests/test_team_config.py sets its own.
os.environ["PLANNER_CONFIG"] = "none"


def scenario_files() -> list[Path]:
    """The example scenarios (`planner solve`), not the quarter files (`planner batch`, a `horizon:` key)."""
    return sorted(
        p for p in SCENARIOS.glob("*.yaml") if "\nhorizon:" not in "\n" + p.read_text()
    )


def quarter_files() -> list[Path]:
    return sorted(set(SCENARIOS.glob("*.yaml")) - set(scenario_files()))


MINIMAL = """\
name: tiny
catalogs: [aws]
workloads:
  - name: job
    kind: training
    memory: {per_gpu: 20GiB}
    work: {gpu_hours: 10, reference_gpu: A100-80GB}
"""


@pytest.fixture
def run():
    """run(args...) -> click Result, with stderr kept apart from stdout."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def scenario_file(tmp_path):
    """scenario_file(text) -> path of a scenario file holding `text` (dedented)."""

    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write
