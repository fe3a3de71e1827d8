"""The `planner batch` report: runs, reservations with utilisation, spending per month, as a
table, the JSON contract or one sectioned CSV."""

from __future__ import annotations

import pandas as pd

from planner.batch.contract import batch_json
from planner.batch.pipeline import BatchPlan
from planner.report.render import render_table, to_csv, to_json
from planner.report.serving import ENDPOINT_DROP, endpoint_footer, endpoint_frame
from planner.report.status import status_line
from planner.solve.outcome import SOLVED

REPLAY_FIELDS = ("gpus_per_node", "pool", "checkpoint_interval_h", "inputs")
"""A scheduled run's fields for `planner simulate` (JSON only: the CSV and the table keep the schedule)."""


SCHEDULE_DROP = ("region", "provider", "nodes", "end")
"""A schedule's columns left out first in a narrow terminal: it keeps the run, its start, the offer, GPUs, market,
hours, P(deadline) and cost."""


def batch_text(
    plan: BatchPlan, fmt: str, timings: bool = True, data: dict | None = None
) -> str:
    """The schedule in `fmt`; `data`, its `batch_json` where the caller has it already."""
    data = batch_json(plan, timings) if data is None else data
    if fmt == "json":
        return to_json(data)
    runs = pd.DataFrame(
        [r for r in data["runs"] if r["scheduled"]],
        columns=[
            "run",
            "scheduled",
            "start",
            "end",
            "provider",
            "region",
            "instance_type",
            "nodes",
            "gpus",
            "market",
            "expected_wall_h",
            "p_deadline",
            "cost_usd",
        ],
    )
    if fmt == "csv":
        return sections_csv(data)
    if plan.status not in SOLVED:
        frame = pd.DataFrame(data["unscheduled"], columns=["run", "reason"]).rename(
            columns={"reason": "why"}
        )
        title = f"{plan.status}: quarter {plan.loaded.quarter.name!r} cannot be planned"
        return render_table(frame, title=title) if not frame.empty else title + "\n"
    shown = runs.assign(
        start=runs["start"].astype(str).str[:16],
        end=runs["end"].astype(str).str[:16],
        expected_wall_h=runs["expected_wall_h"].astype(float).round(1),
        p_deadline=runs["p_deadline"].astype(float).round(3),
    )
    shown = shown.drop(columns=["scheduled", "reason"], errors="ignore")
    text = render_table(
        shown,
        title=f"schedule for quarter {plan.loaded.quarter.name!r}",
        drop=SCHEDULE_DROP,
        headers={
            "instance_type": "instance",
            "expected_wall_h": "hours",
            "p_deadline": "P(dl)",
        },
    )
    if data["endpoints"]:
        text += "\n" + render_table(
            endpoint_frame(data["endpoints"]),
            title="endpoints",
            drop=ENDPOINT_DROP,
            footer=endpoint_footer(data["endpoints"]),
        )
    if data["reservations"]:
        bought = pd.DataFrame(data["reservations"])
        bought = bought.assign(
            start=bought["start"].astype(str).str[:16],
            end=bought["end"].astype(str).str[:16],
        )
        # times as the schedule writes them
        text += "\n" + render_table(bought, title="reservations to buy")
    text += "\n" + render_table(
        pd.DataFrame(data["months"]), title="spending per month"
    )
    if data["unscheduled"]:
        text += "\n" + render_table(
            pd.DataFrame(data["unscheduled"]).rename(columns={"reason": "why"}),
            title="runs left out",
        )
    count = len(plan.endpoints.traffic) if plan.endpoints is not None else 0
    served = (
        f" and {len(plan.endpoints.options)} options for {count} endpoint{'s' if count > 1 else ''}"
        if count
        else ""
    )
    runs = sum(1 for r in plan.loaded.quarter.runs if not r.serving)
    if (
        "schedule_confidence" in data
        and "simulated_holds" in data["schedule_confidence"]
    ):
        sc = data["schedule_confidence"]
        text += (
            f"\nschedule confidence: every run's slot sized at {sc['per_run']:.4g} so that the whole schedule "
            f"holds with probability >= {sc['target']:g}; replayed, it holds in {sc['simulated_holds']:.1%} "
            f"of {sc['trials']:,} trials\n"
        )
    text += (
        "\n"
        + status_line(
            plan.result,
            f"{len(plan.cands)} candidates for {runs} runs{served}",
            data["prices_as_of"],
        )
        + "\n"
    )
    return text


def sections_csv(data: dict) -> str:
    """Runs, reservations and months in one CSV, told apart by its first column `section`
    (one file, so a pipe or `-o FILE` carries the whole plan; empty cells where a section has no such column)."""
    parts = [
        pd.DataFrame(data[key])
        .drop(columns=list(REPLAY_FIELDS), errors="ignore")
        .assign(section=name)
        for key, name in (
            ("runs", "run"),
            ("reservations", "reservation"),
            ("months", "month"),
        )
        if data[key]
    ]
    if not parts:
        return "section\n"
    frame = pd.concat(parts, ignore_index=True)
    for column in ("nodes", "gpus"):
        if column in frame:
            # whole numbers, blank where a section has none
            frame[column] = frame[column].astype("Int64")
    return to_csv(frame[["section"] + [c for c in frame.columns if c != "section"]])
