"""Spot promises held to measured availability (docs/cost-model.md §11): a spot or spot_fallback
candidate's figures come from the fitted process (§3), and before one is offered it is replayed on the
measured traces that speak for its offer (economics/trace_replay.py). It is kept only if it meets its
deadline in at least the asked share of those replays and its node-hours there are at most
`COST_SLACK` above the fitted figure; a gang larger than any measured one is not offered at all.

Which traces speak for an offer (`covering`): its own instance type's where one holds enough nodes, else
any of its provider's; a provider with no traces of its own is held to every trace (a stand-in, said so).
The fitted process and the traces disagree most where availability differs from zone to zone and where
a gang needs many nodes at once (the fit pools zones and has one capacity wait for every gang size), so
this is where the measured record decides.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from planner.economics import trace_replay
from planner.economics.candidate import CandidateInputs
from planner.economics.segment_plans import segment_plan
from planner.load.traces import Trace, load_traces

__all__ = [
    "COST_SLACK",
    "STARTS_PER_TRACE",
    "Replayed",
    "covering",
    "largest_gang",
    "replayed",
    "verdict",
    "refuses",
    "catalog_traces",
]

COST_SLACK = 0.10
"""How far a candidate's node-hours on replay, market by market, may run above its fitted ones and still be
offered: its replayed cost then stays within 10 % of its fitted cost at any prices."""
STARTS_PER_TRACE = 40
"""Start offsets spread over each trace (Can't Be Late replays each policy from many starts)."""
STEPS = 2000
"""Steps a replay takes over its horizon at most, each no longer than a fiftieth of the job's work: five minutes
up to a horizon of about a week, coarser beyond (a step is up only if the trace is up throughout it, so a coarser
step errs towards less spot, never more)."""


@dataclass(frozen=True)
class Replayed:
    """A job's replays on the traces that speak for its offer, from `STARTS_PER_TRACE` starts each."""

    p_deadline: float  # the share of replays done by the deadline
    p_deadline_low: float  # what a zone not measured may fall to (`_new_zone_spread`): what is held to
    spot_node_h: float  # mean node-hours on spot (a fallback's on-demand ones below)
    on_demand_node_h: float
    spot_node_h_high: float  # what a zone not measured may rise to (`_new_zone_spread` of the traces' means)
    on_demand_node_h_high: float
    wall_h: float | None  # mean over the replays that finished; None: none did
    traces: tuple[str, ...]
    stand_in: bool  # no trace of the offer's provider: every trace stands in

    def compute_usd(self, spot_price: float, on_demand_price: float = 0.0) -> float:
        """Node-hours at their prices: what `planner simulate --traces` reports as realised."""
        return spot_price * self.spot_node_h + (
            on_demand_price * self.on_demand_node_h if self.on_demand_node_h else 0.0
        )


def covering(
    traces: tuple[Trace, ...], provider: str, instance_type: str, nodes: int
) -> tuple[list[Trace], bool]:
    """The traces that speak for `nodes` nodes of an offer, and whether they stand in for a provider without
    traces of its own (module doc); empty when the provider's traces hold fewer nodes than that."""
    own = [t for t in traces if t.cloud in (None, provider)]
    stand_in = not any(t.cloud == provider for t in traces)
    fits = [t for t in (traces if stand_in else own) if t.nodes >= nodes]
    same_type = [t for t in fits if t.instance_type == instance_type]
    return same_type or fits, stand_in


def largest_gang(traces: tuple[Trace, ...], provider: str) -> int:
    """The most nodes any trace that speaks for `provider` held at once (0: none)."""
    own = [t for t in traces if t.cloud in (None, provider)] or list(traces)
    return max((int(t.up.max()) for t in own), default=0)


MEMO_ENTRIES = 20_000
"""Replays kept per process (a few hundred bytes each): a replay is a pure function of the job, the policy and
the traces, and every solve, sweep point and test of the same examples asks for the same ones again."""
_memo: dict = {}


def replayed(
    inputs: CandidateInputs, market: str, traces: list[Trace], stand_in: bool = False
) -> Replayed:
    """`inputs` (its time budget the deadline) replayed under `market`'s policy on each of `traces`, read from
    `STARTS_PER_TRACE` starts over twice the deadline (four times the failure-free time without one)."""
    key = (inputs, market, tuple(t.key for t in traces), stand_in)
    found = _memo.get(key)
    if found is None:
        if len(_memo) >= MEMO_ENTRIES:
            _memo.clear()
        found = _memo[key] = _replayed(inputs, market, traces, stand_in)
    return found


def _replayed(
    inputs: CandidateInputs, market: str, traces: list[Trace], stand_in: bool
) -> Replayed:
    deadline = inputs.time_budget_h
    horizon = (
        2 * deadline
        if math.isfinite(deadline)
        else 4 * (inputs.work_h + inputs.restart_h)
    )
    job = trace_replay.TraceJob(inputs, 1.0)  # node-hours are what it keeps
    step = min(horizon / STEPS, (inputs.work_h + inputs.restart_h) / 50)
    out = [
        trace_replay.replay(job, up, step_h, market, spans)
        for up, step_h, spans in _stacked(traces, inputs.nodes, horizon, step)
    ]
    wall = np.concatenate([o.wall_h for o in out])
    done = np.isfinite(wall)
    on_time = inputs.estimate_error.met(
        wall, deadline, segment_plan(inputs).T0, market == "spot_fallback"
    )
    # each trace's starts lie together
    per_trace = on_time.reshape(len(traces), STARTS_PER_TRACE).mean(axis=1)
    spot = (
        np.concatenate([o.spot_node_h for o in out])
        .reshape(len(traces), STARTS_PER_TRACE)
        .mean(axis=1)
    )
    on_demand = (
        np.concatenate([o.on_demand_node_h for o in out])
        .reshape(len(traces), STARTS_PER_TRACE)
        .mean(axis=1)
    )
    return Replayed(
        p_deadline=float(np.mean(on_time)),
        p_deadline_low=float(np.mean(on_time) - _new_zone_spread(per_trace)),
        spot_node_h=float(np.mean(spot)),
        on_demand_node_h=float(np.mean(on_demand)),
        spot_node_h_high=float(np.mean(spot) + _new_zone_spread(spot, binomial=False)),
        on_demand_node_h_high=float(
            np.mean(on_demand) + _new_zone_spread(on_demand, binomial=False)
        ),
        wall_h=float(np.mean(wall[done])) if done.any() else None,
        traces=tuple(t.name for t in traces),
        stand_in=stand_in,
    )


def _new_zone_spread(per_trace: np.ndarray, binomial: bool = True) -> float:
    """How far a figure of a job that lands in a zone not measured may stray from the traces' mean: the
    predictive spread of one more trace, sd * sqrt(1 + 1/n), each trace a zone and period of its own. A plan runs
    in one zone, not in the zones' mean, and the zones differ far more than one trace's starts do (a 16-node
    probe in one zone never held eight nodes at once). One trace alone gives its starts' binomial error for a
    hit rate (`binomial`), nothing for other figures."""
    if len(per_trace) > 1:
        return float(np.std(per_trace, ddof=1) * math.sqrt(1 + 1 / len(per_trace)))
    if not binomial:
        return 0.0
    p = float(per_trace[0])
    return math.sqrt(p * (1 - p) / STARTS_PER_TRACE)


_stacked_memo: dict = {}
STACKED_BYTES = 256 << 20
"""What the stacked availabilities kept per process may hold (traces x starts x steps booleans and their windows,
about a MB each): the candidates of one job, and the runs of a quarter, differ in their segments and deadlines,
not in what they replay on. Each is kept over `STEPS` steps at least, and a shorter horizon reads its first
steps."""


def _stacked(
    traces: list[Trace], nodes: int, horizon: float, step: float
) -> list[tuple[np.ndarray, float, trace_replay.Spans]]:
    """`trace_replay.windows` of each trace over `horizon` in steps of `step` (five minutes at least, or its
    own gap if coarser), stacked by step (traces of one step replay together), with their `spans` (kept for
    each shorter horizon read)."""
    least = max(trace_replay.STEP_H, step)
    groups: dict[float, list[Trace]] = {}
    for trace in traces:
        _, step_h = trace_replay.resampling(trace.gap_h, len(trace.up), least)
        groups.setdefault(step_h, []).append(trace)
    out = []
    for step_h, group in sorted(groups.items()):
        steps = trace_replay.steps_over(horizon, step_h)
        key = (tuple(t.key for t in group), nodes, step_h)
        found = _stacked_memo.get(key)
        if found is None or found[0].shape[1] < steps:
            longest = max(horizon, STEPS * step_h)
            up = np.vstack(
                [
                    trace_replay.windows(
                        t.up, t.gap_h, nodes, STARTS_PER_TRACE, longest, least
                    )[0]
                    for t in group
                ]
            )
            found = (up, trace_replay.spans(up), {})
            if sum(_bytes(f) for f in _stacked_memo.values()) > STACKED_BYTES:
                _stacked_memo.clear()
            _stacked_memo[key] = found
        up, spans, shorter = found
        if up.shape[1] > steps:
            if steps not in shorter:
                shorter[steps] = spans.first(steps)
            up, spans = up[:, :steps], shorter[steps]
        out.append((up, step_h, spans))
    return out


def _bytes(stacked: tuple[np.ndarray, trace_replay.Spans, dict]) -> int:
    """About what a stack keeps: its availability and windows, and those of its shorter horizons."""
    up, spans, shorter = stacked
    return up.nbytes + sum(
        a.nbytes for s in (spans, *shorter.values()) for a in (s.row, s.begin, s.end)
    )


def verdict(
    evidence: Replayed,
    confidence: float,
    fitted_spot_node_h: float,
    fitted_on_demand_node_h: float = 0.0,
) -> str:
    """Why a candidate with this replay is not offered ('' when it is). Node-hours of each market, not dollars:
    the verdict must not depend on prices, or offers alike but for their prices (screening prices only the
    cheapest of them) would be judged apart; and with each market's node-hours within `COST_SLACK` of the
    fitted ones, so is the cost at any prices. A provider with no traces of its own (`stand_in`) is itself a
    zone not measured: its node-hours are held at what one more zone may rise to, not the zones' mean (its
    mean cost is one draw from the zones', not their average)."""
    where = (
        f"{len(evidence.traces)} measured {'stand-in ' if evidence.stand_in else ''}availability trace"
        + ("s" if len(evidence.traces) != 1 else "")
    )
    if evidence.p_deadline_low < confidence:
        return (
            f"met its deadline in {evidence.p_deadline:.0%} of replays on {where} ({evidence.p_deadline_low:.0%} "
            f"in a zone not measured, for how much the traces differ), below the {confidence:.0%} asked"
        )
    high = evidence.stand_in
    for market, replayed, fitted in (
        (
            "spot",
            evidence.spot_node_h_high if high else evidence.spot_node_h,
            fitted_spot_node_h,
        ),
        (
            "on-demand",
            evidence.on_demand_node_h_high if high else evidence.on_demand_node_h,
            fitted_on_demand_node_h,
        ),
    ):
        if replayed > (1 + COST_SLACK) * fitted + 1e-9:
            ratio = (
                f"{replayed / fitted:.2f}x the fitted figure"
                if fitted > 0
                else "none fitted"
            )
            return (
                f"its {market} node-hours on replays on {where} are {replayed:,.1f}"
                f"{' in a zone not measured' if high else ''} ({ratio}; at most {1 + COST_SLACK:.2f}x is offered)"
            )
    return ""


def refuses(
    evidence: Replayed, confidence: float, on_demand_at_most: float = math.inf
) -> bool:
    """Whether `verdict` turns a row down before it is priced: its replays miss the deadline, or show more on-demand
    node-hours than `COST_SLACK` allows over the most its fitted ones can be (`fallback.on_demand_at_most`; spot
    alone is held on its spot node-hours, known only once priced)."""
    if evidence.p_deadline_low < confidence:
        return True
    replayed = (
        evidence.on_demand_node_h_high
        if evidence.stand_in
        else evidence.on_demand_node_h
    )
    return replayed > (1 + COST_SLACK) * on_demand_at_most + 1e-9


@functools.cache
def shipped_traces() -> tuple[Trace, ...]:
    return tuple(load_traces())


def catalog_traces(catalog) -> tuple[Trace, ...]:
    """The traces a catalog's spot offers are held to: its own (`Catalog.spot_traces`), else the shipped ones."""
    return shipped_traces() if catalog.spot_traces is None else catalog.spot_traces
