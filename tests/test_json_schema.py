"""`planner schema`: the JSON Schema of scenario and quarter files, for editors. Every shipped example
validates against it as an editor reads YAML (dates as text), and a misspelled key does not."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import REPO, SCENARIOS

from planner.load.yaml import load_yaml


def _as_an_editor_reads(path):
    return json.loads(json.dumps(load_yaml(path), default=str))


def _validator(run, kind: str):
    result = run("schema", kind)
    assert result.exit_code == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    # the shipped one
    assert schema == json.loads(
        (REPO / "docs" / "schema" / f"{kind}.schema.json").read_text()
    )
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_example_validates(run, path):
    raw = _as_an_editor_reads(path)
    validator = _validator(run, "quarter" if "horizon" in raw else "scenario")
    assert [e.message for e in validator.iter_errors(raw)] == []


def test_a_misspelled_key_or_a_bare_latency_is_flagged(run):
    validator = _validator(run, "scenario")
    raw = _as_an_editor_reads(SCENARIOS / "serving-chat.yaml")
    raw["workloads"][0]["time_budgt"] = "3d"
    assert any("time_budgt" in e.message for e in validator.iter_errors(raw))
    raw = _as_an_editor_reads(SCENARIOS / "serving-chat.yaml")
    raw["workloads"][0]["slo"]["ttft"] = 500
    assert list(validator.iter_errors(raw))


def test_schema_writes_a_file(run, tmp_path):
    out = tmp_path / "scenario.schema.json"
    result = run("schema", "-o", out)
    assert result.exit_code == 0 and json.loads(out.read_text())["title"] == "Scenario"


GOLDEN = sorted((REPO / "tests" / "golden").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_every_shipped_plan_is_its_schema_and_declares_every_key(run, path):
    """The plans and schedules the shipped examples give (the golden files) against `planner schema plan|schedule`,
    and read into the records (`schema/plan.py`) with no key the records do not declare: a key the writer renames
    fails here, not at replay time."""
    from planner.schema.plan import PlanRecord, ScheduleRecord, undeclared

    data = json.loads(path.read_text())
    kind, record = (
        ("schedule", ScheduleRecord) if "runs" in data else ("plan", PlanRecord)
    )
    assert [e.message for e in _validator(run, kind).iter_errors(data)] == []
    assert undeclared(record.model_validate(data)) == []


def test_the_timings_block_and_a_renamed_key_are_checked(run):
    from planner.schema.plan import PlanRecord, undeclared

    result = run("solve", SCENARIOS / "pretrain-deadline.yaml", "--format", "json")
    data = json.loads(result.stdout)
    assert "solve_report" in data and undeclared(PlanRecord.model_validate(data)) == []
    validator = _validator(run, "plan")
    assert [e.message for e in validator.iter_errors(data)] == []
    # a required key renamed
    data["assignments"][0]["expect"] = data["assignments"][0].pop("expected")
    assert any(
        "'expected' is a required property" in e.message
        for e in validator.iter_errors(data)
    )
    data = json.loads(result.stdout)
    # an optional one
    data["assignments"][0]["gpu_name"] = data["assignments"][0].pop("gpu")
    assert undeclared(PlanRecord.model_validate(data)) == [".assignments[0].gpu_name"]
