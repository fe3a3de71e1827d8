"""A workload's risk preferences in candidate generation: which priced spot and spot_fallback candidates take
more risk than it allows (expected preemptions, placement scores, the spot saving over safer markets).
"""

from __future__ import annotations

import math

from planner.schema.scenario import PlacementScore, Scenario
from planner.schema.workload import Risk, Workload


def risk_of(workload: Workload, scenario: Scenario) -> Risk:
    """The workload's risk preferences over the scenario's defaults."""
    return workload.risk.over(scenario.defaults.risk)


SAFETY = {
    "spot": 0,
    "spot_fallback": 1,
    "on_demand": 2,
    "reserved": 2,
    "capacity_block": 2,
    "flex_start": 2,
}
"""How safe a market is from preemptions: a candidate's spot saving is measured against safer ones (a purchase
option is never preempted)."""


def too_risky(candidate: dict, risk: Risk, scores: tuple[PlacementScore, ...]) -> str:
    """Why a priced spot or spot_fallback candidate takes more risk than `risk` allows ('' when it does not):
    too many expected preemption events, or a region scored below `risk.min_placement_score` for its nodes."""
    if candidate["market"] == "on_demand":
        return ""
    cap, events = risk.max_expected_preemptions, candidate["preemption_events"]
    if cap is not None and events > cap:
        return f"expects {events:,.1f} preemption events, over risk.max_expected_preemptions ({cap:g})"
    least = risk.min_placement_score
    scored = (
        placement_score(
            scores,
            candidate["provider"],
            candidate["region"],
            candidate["instance_type"],
            candidate["nodes"],
        )
        if least is not None
        else None
    )
    if scored is not None and scored.score < least:
        return (
            f"its spot placement score in {scored.region} is {scored.score} for {scored.nodes} node(s), under "
            f"risk.min_placement_score ({least})"
        )
    return ""


def placement_score(
    scores: tuple[PlacementScore, ...],
    provider: str,
    region: str,
    instance_type: str,
    nodes: int,
) -> PlacementScore | None:
    """The score that speaks for `nodes` nodes of an offer: its smallest scored capacity of at least `nodes`, else
    its largest (a smaller request is at least as likely granted, so a low score there rules a larger gang out
    too, where a high one says nothing of it); None where the offer is not scored (it is kept)."""
    own = sorted(
        (
            s
            for s in scores
            if (s.provider, s.region, s.instance_type)
            == (provider, region, instance_type)
        ),
        key=lambda s: s.nodes,
    )
    return next((s for s in own if s.nodes >= nodes), own[-1] if own else None)


def saving_kept(out: list[dict], risk: Risk) -> list[int]:
    """The candidates kept under `risk.min_spot_saving`: those that cost at least that share less than the
    cheapest candidate of a safer market (`SAFETY`), or have none safer; all without it."""
    m = risk.min_spot_saving
    if not m:
        return list(range(len(out)))
    cheapest = {
        level: min(
            (c["cost_usd"] for c in out if SAFETY[c["market"]] > level),
            default=math.inf,
        )
        for level in set(SAFETY.values())
    }
    return [
        j
        for j, c in enumerate(out)
        if c["cost_usd"] <= (1 - m) * cheapest[SAFETY[c["market"]]]
    ]
