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
    assert schema == json.loads((REPO / "docs" / "schema" / f"{kind}.schema.json").read_text())  # the shipped one
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
