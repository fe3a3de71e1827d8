"""A team's defaults in `planner.toml`: the catalogs, regions, quotas and risk preferences its scenarios share,
so each file says only what is its own.

The file is found from the scenario's (or quarter's) folder upward, the nearest one; a user-level one
(`$XDG_CONFIG_HOME/planner/planner.toml`, by default `~/.config/planner/planner.toml`) lies under it, key by key.
What a file says itself always wins:

    catalogs = ["aws", "gcp", "lambda"]          # for files that name none
    [defaults]                                   # under each file's own `defaults`
    deadline_confidence = 0.95
    [defaults.risk]
    min_spot_saving = "10%"
    [constraints.gpu_quotas]                     # under each file's own `constraints`
    aws = 64
    [allow]                                      # each workload's (run's) `allow`, key by key
    regions = ["us-east-1", "us-west-2"]

`PLANNER_CONFIG=none` reads no file; `PLANNER_CONFIG=PATH` reads that one instead of searching.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field

from planner.errors import PlannerError
from planner.load.yaml import YamlMapping, key_path, read_text
from planner.schema.fields import Strict
from planner.schema.scenario import Constraints, Defaults
from planner.schema.workload import Placement

CONFIG_NAME = "planner.toml"


class TeamConfig(Strict):
    """What `planner.toml` may say (each part as the scenario file writes it)."""

    catalogs: tuple[str, ...] | None = Field(
        None, description="catalogs for files that name none"
    )
    defaults: Defaults | None = None
    constraints: Constraints | None = None
    allow: Placement | None = Field(
        None, description="every workload's placement rules, key by key"
    )


def config_files(start: Path) -> list[Path]:
    """The config files that apply to a file in folder `start`: the user-level one, then the nearest project one
    (later ones win)."""
    chosen = os.environ.get("PLANNER_CONFIG")
    if chosen:
        return [] if chosen.lower() == "none" else [Path(chosen)]
    home = (
        Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        / "planner"
        / CONFIG_NAME
    )
    found = [home] if home.is_file() else []
    for folder in [start.resolve(), *start.resolve().parents]:
        if (folder / CONFIG_NAME).is_file():
            if folder / CONFIG_NAME != home:
                found.append(folder / CONFIG_NAME)
            break
    return found


def read_config(path: Path) -> dict:
    """One config file's keys, checked: a bad one is one line naming the file and the key."""
    from pydantic import ValidationError

    from planner.load.scenario import validation_problem

    try:
        data = tomllib.loads(read_text(path, "config file", "TOML"))
    except tomllib.TOMLDecodeError as exc:
        raise PlannerError(f"not valid TOML: {exc}", str(path)) from None
    try:
        TeamConfig.model_validate(data)
    except ValidationError as exc:
        message, loc = validation_problem(TeamConfig, exc, data)
        raise PlannerError(
            message, f"{path}: {key_path(loc)}" if loc else str(path)
        ) from None
    return data


def with_team_config(raw: Any, start: Path, items: str) -> tuple[Any, tuple[Path, ...]]:
    """The parsed file `raw` with the team's defaults under its own keys (`items`: "workloads" or "runs"), and
    the config files read. Line numbers stay those of the file itself."""
    files = tuple(config_files(start))
    if not files or not isinstance(raw, dict):
        return raw, files
    config: dict = {}
    for path in files:
        config = _merged(config, read_config(path))
    out = YamlMapping(raw)
    out.lines = getattr(raw, "lines", {})
    if "catalogs" in config and "catalogs" not in raw:
        out["catalogs"] = config["catalogs"]
    for key in ("defaults", "constraints"):
        if key in config:
            out[key] = _merged(config[key], raw.get(key) or {})
    if "allow" in config and isinstance(raw.get(items), list):
        out[items] = [
            {**w, "allow": _merged(config["allow"], w.get("allow") or {})}
            if isinstance(w, dict)
            else w
            for w in raw[items]
        ]
    return out, files


def _merged(under: dict, over: dict) -> dict:
    """`over`'s keys over `under`'s, mappings merged key by key."""
    out = dict(under)
    for key, value in over.items():
        out[key] = (
            _merged(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out
