"""Tables for people: at 80, 120 and 200 columns no shipped example's table cuts a number. Numbers and money keep
their whole width, text wraps, and where that does not fit, columns are left out with a line that names them."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from conftest import SCENARIOS, scenario_files

from planner.cli import main

WIDTHS = (80, 120, 200)


def _at(width: int, *args) -> str:
    result = CliRunner().invoke(
        main,
        [str(a) for a in args],
        env={"COLUMNS": str(width)},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def _lines_fit(text: str, width: int) -> None:
    assert "…" not in text  # nothing cut with an ellipsis
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width


@pytest.mark.parametrize(
    "path",
    [p for p in scenario_files() if p.stem != "serving-rag"],
    ids=lambda p: p.stem,
)
def test_every_example_plan_fits_without_cutting_a_number(path):
    plan = json.loads(_at(200, "solve", path, "--format", "json"))
    costs = [f"{a['expected']['cost_usd']:,.2f}" for a in plan["assignments"]]
    for width in WIDTHS:
        text = _at(width, "solve", path)
        _lines_fit(text, width)
        cells = set(re.findall(r"[\d,]+\.\d\d", text))
        assert set(costs) <= cells, (
            width,
            set(costs) - cells,
        )  # every job's cost, to the cent


def test_at_80_columns_a_plan_keeps_what_people_read_first():
    text = _at(80, "solve", SCENARIOS / "team-quarter-mix.yaml")
    header = next(line for line in text.splitlines() if line.startswith("workload"))
    assert [h.strip() for h in header.split("┃")] == [
        "workload",
        "instance",
        "gpus",
        "market",
        "hours",
        "P(dl)",
        "cost_usd",
    ]
    assert (
        "left out at 80 columns: parallelism, checkpoint, region, provider, per_node, nodes, gpu"
        in " ".join(text.split())
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_catalog_list_gpus_and_estimate_fit(width):
    listing = _at(width, "catalog", "list", "--limit", "30")
    _lines_fit(listing, width)
    assert "spot" in listing.splitlines()[0]  # the spot price is never the one left out
    _lines_fit(_at(width, "gpus"), width)
    _lines_fit(
        _at(width, "estimate", SCENARIOS / "serving-chat.yaml", "--gpu", "H100"), width
    )
    _lines_fit(
        _at(width, "estimate", SCENARIOS / "lora-finetune.yaml", "--gpu", "H100"), width
    )
