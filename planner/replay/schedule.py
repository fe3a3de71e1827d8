"""A quarter's schedule replayed (`economics/schedule_sim.py`): each run's wall time drawn from its process,
a late run pushing the runs after it and those waiting for its reserved nodes."""

from __future__ import annotations

from planner.economics.inputs import inputs_from_run
from planner.economics.simulate import replay_problem
from planner.schema.plan import ScheduledRunRecord, ScheduleRecord


def schedule_unreplayable(schedule: ScheduleRecord) -> tuple[int, str, str] | None:
    """The first scheduled run the Monte-Carlo cannot replay in reasonable time (`economics/simulate.py`
    `replay_problem`), as (its index among `runs`, the key at fault under it, why); None when every one can be."""
    for number, r in enumerate(schedule.runs):
        if isinstance(r, ScheduledRunRecord) and (
            found := replay_problem(inputs_from_run(r), r.market)
        ):
            field, why = found
            return number, f"inputs.{field}" if field else "inputs", why
    return None
