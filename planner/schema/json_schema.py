"""The JSON Schema of scenario and quarter files, from the same models that read them, so an editor (VS Code's
YAML extension, JetBrains IDEs) can check a file and complete its keys as it is written. It checks the shape and
the keys; the units (`24h`, `$2500`) and the rules across keys are `planner validate`'s. And the JSON Schema of
what `planner solve` and `planner batch` write (`plan`, `schedule`), from the records `planner simulate` reads
back, for the tools that read a plan."""

from __future__ import annotations

import json

from planner.schema.plan import PlanRecord, ScheduleRecord
from planner.schema.quarter import Quarter
from planner.schema.scenario import Scenario

KINDS = {
    "scenario": Scenario,
    "quarter": Quarter,
    "plan": PlanRecord,
    "schedule": ScheduleRecord,
}


def file_schema(kind: str) -> str:
    """The schema of a `kind` file ("scenario", "quarter", "plan" or "schedule") as JSON text, keys in a stable
    order."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **KINDS[kind].model_json_schema(mode="validation"),
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
