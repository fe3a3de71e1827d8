"""What runs were billed, from a cloud's billing export: FOCUS (the FinOps Open Cost and Usage Specification, which
AWS Data Exports, Azure Cost Management, Google Cloud and OCI export) or AWS's legacy Cost and Usage Report, as
CSV. A line counts for a job when it carries the `planner-job` label `planner export` gives every job's resources
(a cost allocation tag on AWS), and for a run when its charge starts within the run."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.load.catalog import read_table_file
from planner.schema.quarter import _datetime

JOB_LABEL = "planner-job"

FOCUS = ("ChargePeriodStart", "BilledCost", "Tags")
CUR = ("lineItem/UsageStartDate", "lineItem/UnblendedCost")
CUR_TAG = f"resourceTags/user:{JOB_LABEL}"


@dataclass(frozen=True)
class Charge:
    job: str  # the `planner-job` label's value
    start: dt.datetime
    usd: float


def load_billing(path: Path) -> list[Charge]:
    """The labelled charges of one export file; lines without the label are other spending, left out."""
    frame, _, _ = read_table_file(path, "billing export")
    columns = set(frame.columns)
    if set(FOCUS) <= columns:
        start, cost = "ChargePeriodStart", "BilledCost"
        jobs = [_focus_job(tags, path, line) for line, tags in frame["Tags"].items()]
    elif set(CUR) <= columns:
        start, cost = CUR
        if CUR_TAG not in columns:
            raise PlannerError(
                f"no {CUR_TAG} column: activate {JOB_LABEL} as a cost allocation tag and export again",
                str(path),
            )
        jobs = list(frame[CUR_TAG])
    else:
        raise PlannerError(
            "expected a FOCUS export (ChargePeriodStart, BilledCost, Tags) or an AWS Cost and Usage Report "
            "(lineItem/UsageStartDate, lineItem/UnblendedCost)",
            str(path),
        )
    out = []
    for (line, when), usd, job in zip(frame[start].items(), frame[cost], jobs):
        if not isinstance(job, str) or not job:
            continue
        try:
            out.append(Charge(job, _datetime(when), float(usd)))
        except (ValueError, TypeError) as exc:
            raise PlannerError(
                f"expected a time and an amount, got {when!r} and {usd!r} ({exc})",
                f"{path}:{line}",
            ) from None
    return out


def _focus_job(tags, path: Path, line: int) -> str | None:
    """FOCUS `Tags`: a JSON object of the resource's tags and labels (AWS writes user tags as `user:KEY`)."""
    if not isinstance(tags, str) or not tags.strip():
        return None
    try:
        found = json.loads(tags)
    except json.JSONDecodeError:
        raise PlannerError(
            f"Tags is not a JSON object: {tags[:60]!r}", f"{path}:{line}"
        ) from None
    if not isinstance(found, dict):
        return None
    for key in (JOB_LABEL, f"user:{JOB_LABEL}"):
        if isinstance(found.get(key), str):
            return found[key]
    return None


def billed(
    charges: list[Charge], job: str, start: dt.datetime, end: dt.datetime
) -> float | None:
    """What `job` was charged from `start` to `end` (None: nothing labelled in that window)."""
    found = [c.usd for c in charges if c.job == job and start <= c.start < end]
    return sum(found) if found else None
