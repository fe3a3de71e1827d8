"""`planner calibrate` as people read it: the runs against their plan (per workload in the table, per run in CSV
and JSON) and the fit; and the fit as the YAML file a scenario names. The figures are `launch/calibrate.py`'s."""

from __future__ import annotations

import statistics
from dataclasses import asdict

import pandas as pd

from planner.report.render import render_table, to_csv, to_json


def _run_rows(result) -> list[dict]:
    return [
        {
            **asdict(r),
            "wall_error": r.wall_error,
            "cost_error": r.cost_error,
        }
        for r in result.runs
    ]


def _fit_lines(calibration) -> list[str]:
    lines = []
    for e in calibration.efficiency:
        spread = (
            f", {e.interval.level:.0%} interval {e.interval.low:.3f}-{e.interval.high:.3f}"
            if e.interval
            else ""
        )
        lines.append(
            f"throughput {e.gpu} {e.recipe}: {e.factor:.3f} x the estimate ({e.runs} runs{spread})"
        )
    for p in calibration.preemption:
        rate = "-" if p.rate_per_node_h is None else f"{p.rate_per_node_h:.4f}"
        spread = (
            f", {p.interval.level:.0%} interval {p.interval.low:.4f}-{p.interval.high:.4f}"
            if p.interval
            else ""
        )
        wait = (
            f"; capacity wait {p.capacity_wait_h:.2f} h mean"
            + (f", cv {p.capacity_wait_cv:.2f}" if p.capacity_wait_cv else "")
            + f" ({p.waits} waits)"
            if p.capacity_wait_h is not None
            else ""
        )
        lines.append(
            f"preemptions {p.provider} {p.instance_type}: {rate} per node-hour ({p.events} events in "
            f"{p.node_h:,.0f} node-hours{spread}){wait}"
        )
    for s in calibration.storage:
        parts = []
        if s.checkpoint_factor is not None:
            parts.append(f"checkpoints {s.checkpoint_factor:.2f} x")
        if s.restart_factor is not None:
            parts.append(f"restarts {s.restart_factor:.2f} x")
        lines.append(
            f"storage {s.storage}: {', '.join(parts)} the plan's ({s.runs} runs)"
        )
    return lines


def calibration_text(result, fmt: str) -> str:
    rows = _run_rows(result)
    if fmt == "json":
        wall, cost = result.errors("wall"), result.errors("cost")
        return to_json(
            {
                "calibration": result.calibration.model_dump(exclude_none=True),
                "runs": rows,
                "wall_error": None
                if wall is None
                else {"median": wall[0], "worst": wall[1]},
                "cost_error": None
                if cost is None
                else {"median": cost[0], "worst": cost[1]},
                "notes": result.notes,
            }
        )
    if fmt == "csv":
        return to_csv(pd.DataFrame(rows))
    by_workload: dict[str, list] = {}
    for r in result.runs:
        by_workload.setdefault(r.workload, []).append(r)
    frame = pd.DataFrame(
        [
            {
                "workload": name,
                "runs": len(runs),
                "market": runs[0].market,
                "wall_planned_h": round(runs[0].planned_wall_h, 2),
                "wall_median_h": round(statistics.median(r.wall_h for r in runs), 2),
                "wall_error_median": f"{statistics.median(r.wall_error for r in runs):+.1%}",
                "work_planned_h": round(runs[0].planned_work_h, 2),
                "work_measured_h": round(statistics.median(r.work_h for r in runs), 2),
                "preemptions": sum(r.preemptions for r in runs),
                "cost_planned_usd": round(runs[0].planned_cost_usd, 2),
                "billed_median_usd": _median([r.billed_usd for r in runs]),
            }
            for name, runs in by_workload.items()
        ]
    )
    footer = []
    for name, label in (("wall", "wall time"), ("cost", "cost")):
        found = result.errors(name)
        if found is not None:
            footer.append(
                f"{label} against the plan, per run: median error {found[0]:.1%}, worst {found[1]:.1%}"
            )
    footer += ["fit:"] + [f"  {line}" for line in _fit_lines(result.calibration)]
    footer += result.notes
    return render_table(
        frame,
        title=f"{len(result.runs)} runs against the plan they followed",
        footer=footer,
    )


def _median(values) -> float | None:
    found = [v for v in values if v is not None]
    return round(statistics.median(found), 2) if found else None


def calibration_yaml(result) -> str:
    """The fit as a scenario's `calibration:` file, its numbers rounded to what the runs can tell."""
    from io import StringIO

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    out = StringIO()
    out.write(
        f"# planner calibrate: {result.calibration.runs} runs, the latest ending "
        f"{result.calibration.fitted_on}.\n# Name it in a scenario (calibration: <this file>) "
        "and plan again.\n"
    )
    yaml.dump(_rounded(result.calibration.model_dump(exclude_none=True)), out)
    return out.getvalue()


def _rounded(value):
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value
