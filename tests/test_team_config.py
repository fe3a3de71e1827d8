"""A team's `planner.toml`: catalogs, defaults, quotas and placement its files share, found from the file's folder
upward (over a user-level one); what a file says itself wins, and a bad config is one located line."""

from __future__ import annotations

import json

import pytest
from test_bad_input import assert_one_line_error

from planner.load.quarter import load_quarter
from planner.load.scenario import load_scenario

SCENARIO = """\
name: team
defaults: {deadline_confidence: 0.8}
workloads:
  - name: tune
    kind: fine_tuning
    model: llama-3.1-8b
    method: lora
    work: {tokens: 100M}
    time_budget: 24h
  - name: pinned
    kind: fine_tuning
    model: llama-3.1-8b
    method: lora
    work: {tokens: 100M}
    allow: {regions: [us-west-2]}
"""
TEAM = """\
catalogs = ["aws"]
[defaults]
deadline_confidence = 0.95
hardware_failure_per_gpu_h = 0.0001
[defaults.risk]
min_spot_saving = "10%"
[constraints.gpu_quotas]
aws = 24
[allow]
regions = ["us-east-1"]
providers = ["aws"]
"""


@pytest.fixture
def team(tmp_path, monkeypatch):
    monkeypatch.delenv("PLANNER_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    (tmp_path / "planner.toml").write_text(TEAM)
    folder = tmp_path / "plans" / "q1"
    folder.mkdir(parents=True)
    path = folder / "team.yaml"
    path.write_text(SCENARIO)
    return path


def test_the_nearest_config_fills_what_the_file_leaves_out(team):
    loaded = load_scenario(team)
    s = loaded.scenario
    assert s.catalogs == ("aws",)
    assert s.defaults.deadline_confidence == 0.8  # the file's own
    assert (
        s.defaults.hardware_failure_per_gpu_h == 0.0001
        and s.defaults.risk.min_spot_saving == pytest.approx(0.1)
    )
    assert s.constraints.gpu_quotas == {"aws": 24}
    tune, pinned = s.workloads
    assert tune.allow.regions == ("us-east-1",) and tune.allow.providers == ("aws",)
    # key by key
    assert pinned.allow.regions == ("us-west-2",) and pinned.allow.providers == ("aws",)
    assert team.parent.parent.parent / "planner.toml" in loaded.inputs


def test_validate_names_the_config(run, team):
    result = run("validate", team)
    assert (
        result.exit_code == 0
        and f"with {team.parent.parent.parent / 'planner.toml'}" in result.stdout
    )


def test_a_plan_keeps_the_teams_limits(run, team):
    plan = json.loads(run("solve", team, "--format", "json").stdout)
    regions = {a["workload"]: a["region"] for a in plan["assignments"]}
    assert regions == {"tune": "us-east-1", "pinned": "us-west-2"}
    assert sum(a["gpus"] for a in plan["assignments"]) <= 24


def test_the_user_level_file_lies_under_the_projects(team, tmp_path):
    home = tmp_path / "home" / "planner"
    home.mkdir(parents=True)
    home.joinpath("planner.toml").write_text(
        "[defaults]\nvram_headroom = 0.2\n[constraints.gpu_quotas]\naws = 8\n"
    )
    s = load_scenario(team).scenario
    assert s.defaults.vram_headroom == 0.2 and s.constraints.gpu_quotas == {"aws": 24}


def test_none_or_a_named_file(team, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANNER_CONFIG", "none")
    assert load_scenario(team).scenario.catalogs == (
        "aws",
        "gcp",
        "azure",
        "lambda",
        "runpod",
    )
    other = tmp_path / "other.toml"
    other.write_text('catalogs = ["lambda"]\n')
    monkeypatch.setenv("PLANNER_CONFIG", str(other))
    assert load_scenario(team).scenario.catalogs == ("lambda",)


def test_a_bad_config_is_one_located_line(run, team):
    config = team.parent.parent.parent / "planner.toml"
    config.write_text("[defaults]\ndeadline_confidense = 0.9\n")
    assert_one_line_error(
        run("solve", team),
        "planner.toml: defaults.deadline_confidense",
        "did you mean 'deadline_confidence'",
    )
    config.write_text("[allow\n")
    assert_one_line_error(run("solve", team), "planner.toml", "not valid TOML")
    config.write_text("[defaults]\ndeadline_confidence = 2\n")
    assert_one_line_error(
        run("validate", team), "planner.toml: defaults.deadline_confidence"
    )


def test_an_output_never_replaces_the_config(run, team):
    config = team.parent.parent.parent / "planner.toml"
    assert_one_line_error(
        run("solve", team, "-o", config), "refusing to overwrite an input file"
    )
    assert config.read_text() == TEAM


def test_a_quarter_reads_it_too(team, tmp_path):
    quarter = team.parent / "q.yaml"
    quarter.write_text(
        "name: q\nhorizon: {start: 2027-01-04, end: 2027-02-01, step: 6h}\nruns:\n"
        "  - name: tune\n    kind: fine_tuning\n    model: llama-3.1-8b\n    method: lora\n"
        "    work: {tokens: 100M}\n"
    )
    loaded = load_quarter(quarter)
    assert loaded.quarter.catalogs == ("aws",) and loaded.quarter.runs[
        0
    ].allow.regions == ("us-east-1",)
