"""The one adapter from a workload and a candidate's numbers to the cost model's inputs.

`planner solve` (candidates/generate.py) and `planner batch` (batch/pipeline.py) both build
`CandidateInputs` here; the plan checker restates the rules on purpose, to stay independent.
"""

from __future__ import annotations

import dataclasses
import math

from planner.economics.candidate import CandidateInputs
from planner.economics.estimate_error import EXACT, PUBLISHED, EstimateError
from planner.economics.purchase import Terms
from planner.schema.plan import (
    AssignmentRecord,
    Process,
    PurchaseRecord,
    ScheduledRunRecord,
)
from planner.schema.scenario import Defaults
from planner.schema.workload import Workload


def estimate_error(workload: Workload, defaults: Defaults) -> EstimateError:
    """The error of `workload`'s throughput estimate (its own setting over the defaults'): `published`, the
    physics' fit to published runs (§12), or a spread the user states, centred on the estimate."""
    chosen = (
        workload.estimate_error
        if workload.estimate_error is not None
        else defaults.estimate_error
    )
    return PUBLISHED if chosen == "published" else EstimateError(0.0, float(chosen))


def cost_inputs(
    workload: Workload,
    *,
    work_h: float,
    nodes: int,
    gpus_per_node: int,
    spot_rate_per_node_h: float,
    price: float,
    granularity_h: float,
    minimum_h: float,
    hw_rate: float,
    checkpoint_interval_h: float,
    checkpoint_write_h: float,
    restart_h: float,
    storage_usd_per_h: float = 0.0,
    egress_usd: float = 0.0,
    capacity_wait_h: float = 0.0,
    capacity_wait_cv: float = 1.0,
    error: EstimateError = EXACT,
) -> CandidateInputs:
    """The cost model's inputs for one candidate of `workload` (`spot_rate_per_node_h`: preemption events per node-hour as
    the job sees them, `spot_event_rate(...) / nodes`, 0 on demand; `hw_rate`: hardware failures per GPU-hour;
    `capacity_wait_h`, `capacity_wait_cv`: mean wait for spot capacity after an event and its coefficient of
    variation; the deadline is the workload's budget)."""
    return CandidateInputs(
        work_h=work_h,
        checkpoint_write_h=checkpoint_write_h,
        restart_h=restart_h,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        spot_rate_per_node_h=spot_rate_per_node_h,
        hw_failure_per_gpu_h=hw_rate,
        price_per_node_h=price,
        billing_granularity_h=granularity_h,
        billing_minimum_h=minimum_h,
        interruption_tolerance=workload.interruption_tolerance,
        checkpoint_interval_h=checkpoint_interval_h,
        time_budget_h=workload.time_budget or math.inf,
        storage_usd_per_h=storage_usd_per_h,
        egress_usd=egress_usd,
        capacity_wait_h=capacity_wait_h,
        capacity_wait_cv=capacity_wait_cv,
        estimate_error=error,
    )


def process_json(
    workload: Workload,
    *,
    work_h: float,
    nodes: int,
    gpus: int,
    spot_rate_per_node_h: float,
    hw_rate: float,
    capacity_wait_h: float,
    checkpoint_write_h: float,
    restart_h: float,
    capacity_wait_cv: float = 1.0,
    error: EstimateError = EXACT,
) -> dict:
    """The failure process of a placed job as the JSON contracts carry it (`planner solve`'s assignments,
    `planner batch`'s runs): total failures per hour, the preemption events among them, the wait after each."""
    events = nodes * spot_rate_per_node_h
    return {
        "work_h": work_h,
        "checkpoint_write_h": checkpoint_write_h,
        "restart_h": restart_h,
        "failure_rate_per_h": events + gpus * hw_rate,
        "preemption_events_per_h": events,
        "capacity_wait_h": capacity_wait_h,
        "capacity_wait_cv": capacity_wait_cv,
        "interruption_tolerance": workload.interruption_tolerance,
        "estimate_error": {"median": error.median, "sigma": error.sigma},
    }


STORAGE_KEYS = {
    "name": "storage",
    "class": "storage_class",
    "persistent": "storage_persistent",
    "read_gbs": "storage_read_gbs",
    "write_gbs": "storage_write_gbs",
    "provisioned_gib": "storage_provisioned_gib",
    "restore_h": "restore_h",
    "stage_h": "stage_h",
    "load_h": "load_h",
    "data_read_h": "data_read_h",
    "data_bound_share": "data_bound_share",
}
"""A plan's `storage` record's keys, and the candidate columns they come from."""


def storage_json(candidate) -> dict:
    """A placed job's storage as the JSON contracts carry it (`candidate`: its candidate row, a mapping)."""
    kind = {"name": str, "class": str, "persistent": bool}
    return {
        key: kind.get(key, float)(candidate[column])
        for key, column in STORAGE_KEYS.items()
    }


def inputs_from_process(
    process: Process,
    *,
    nodes: int,
    gpus_per_node: int,
    checkpoint_interval_h: float | None,
    **rest,
) -> CandidateInputs:
    """The cost model's inputs back from a plan's process record (`rest`: prices, billing, budget, storage);
    a plan written before preemption events were counted apart treats every failure as one, and one written
    before the estimate's error entered P(deadline) an exact estimate."""
    events = (
        process.failure_rate_per_h
        if process.preemption_events_per_h is None
        else process.preemption_events_per_h
    )
    error = process.estimate_error
    return CandidateInputs(
        work_h=process.work_h,
        checkpoint_write_h=process.checkpoint_write_h,
        restart_h=process.restart_h,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        spot_rate_per_node_h=events / nodes,
        hw_failure_per_gpu_h=max(0.0, process.failure_rate_per_h - events)
        / (nodes * gpus_per_node),
        capacity_wait_h=process.capacity_wait_h,
        capacity_wait_cv=process.capacity_wait_cv,
        interruption_tolerance=process.interruption_tolerance,
        checkpoint_interval_h=checkpoint_interval_h or process.work_h,
        estimate_error=EstimateError(error.median, error.sigma) if error else EXACT,
        **rest,
    )


def inputs_from_assignment(a: AssignmentRecord) -> CandidateInputs:
    """The cost model's inputs of one job of a plan (`planner solve`'s JSON contract).

    The plan is self-contained: `failure_rate_per_h` is the job's total λ, of which
    `preemption_events_per_h` are preemption events (each followed by `capacity_wait_h`) and
    the rest hardware failures; storage per hour and egress come back out of the breakdown.
    """
    i, e, b = a.inputs, a.expected, a.breakdown_usd
    inputs = inputs_from_process(
        i,
        nodes=a.nodes,
        gpus_per_node=a.gpus_per_node,
        checkpoint_interval_h=a.checkpoint_interval_h,
        price_per_node_h=i.price_per_node_h,
        billing_granularity_h=i.billing_granularity_h,
        billing_minimum_h=i.billing_minimum_h,
        time_budget_h=i.time_budget_h if i.time_budget_h is not None else math.inf,
        storage_usd_per_h=b.storage / e.wall_h if e.wall_h > 0 else 0.0,
        egress_usd=b.egress,
    )
    return (
        dataclasses.replace(inputs, terms=terms_of(a.purchase))
        if a.purchase is not None
        else inputs
    )


def terms_of(record: PurchaseRecord) -> Terms:
    """A plan's purchase record as the cost model's terms (§13)."""
    return Terms(
        record.kind,
        term_h=record.term_h or math.inf,
        renewable=record.renewable,
        start_h=record.start_h,
        wait_h=record.wait_h,
        wait_cv=record.wait_cv,
        run_cap_h=record.run_cap_h or math.inf,
        overrun_usd_per_node_h=record.overrun_price_per_node_h or 0.0,
    )


def inputs_from_run(r: ScheduledRunRecord) -> CandidateInputs:
    """A scheduled run's process (`planner batch`'s JSON contract) as the cost model's inputs: wall time only, no
    prices; a spot_fallback run with the slack it switches against."""
    inputs = inputs_from_process(
        r.inputs,
        nodes=r.nodes,
        gpus_per_node=r.gpus_per_node,
        checkpoint_interval_h=r.checkpoint_interval_h,
    )
    return (
        dataclasses.replace(inputs, time_budget_h=r.inputs.time_budget_h)
        if r.market == "spot_fallback"
        else inputs
    )
