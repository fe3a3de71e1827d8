"""The JSON Schema of scenario and quarter files, from the same models that read them, so an editor (VS Code's
YAML extension, JetBrains IDEs) can check a file and complete its keys as it is written. It checks the shape and
the keys; the units (`24h`, `$2500`) and the rules across keys are `planner validate`'s."""
from __future__ import annotations

import json

from planner.schema.quarter import Quarter
from planner.schema.scenario import Scenario

KINDS = {"scenario": Scenario, "quarter": Quarter}


def file_schema(kind: str) -> str:
    """The schema of a `kind` file ("scenario" or "quarter") as JSON text, keys in a stable order."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              **KINDS[kind].model_json_schema(mode="validation")}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
