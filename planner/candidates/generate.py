"""Candidate generation: every feasible (offer, node count, market, checkpoint interval) per
workload, with its expected cost from the cost model, then pruning of dominated ones.

The output is a pandas table the CP-SAT model reads (`planner/solve/model.py`); nothing here imports
OR-Tools. Work is shared where the physics is shared: W is computed once per hardware
shape, and the cost model once per *timing key* (shape, nodes, market, preemption rate,
billing rules); offers in twenty regions at twenty prices reuse it. Work is skipped where a
bound settles it: a shape is estimated only if a floor on its W leaves a row of it unbeaten,
and a row is priced only if its screening bounds do.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from planner.candidates.cache import CandidateCache
from planner.candidates.endpoints import endpoint_options
from planner.candidates.expand import (
    ROW_COLUMNS,
    Row,
    expanded_rows,
    grouped,
    row_prices,
)
from planner.candidates.lazy import ClassResult, Deferred, Pending
from planner.candidates.limits import MAX_CANDIDATE_USD, Limits, limits_of
from planner.candidates.offers import apply_overrides, offer_prices, offers_token
from planner.candidates.price import (
    FALLBACK_MIN_SWITCH,
    Kinds,
    candidate_row,
    cost_fingerprint,
    dearer_than_twin,
    exact_of,
    refused_unpriced,
    replay_evidence,
    why_unheld,
)
from planner.candidates.purchase import purchase_records
from planner.candidates.reasons import physics_reason, priced_reason, too_slow_reason
from planner.candidates.risk import SAFETY, risk_of, saving_kept, too_risky
from planner.candidates.screen import (
    Calendar,
    booked_at_most,
    cheapest_twins,
    cost_bounds,
    dominated,
    held_to_traces,
    reach,
    screen_of,
    screened_bounds,
    spot_twins,
    sure_rows,
    unbeaten_rows,
    uncertain_rows,
)
from planner.candidates.shapes import physics_of
from planner.candidates.tables import pareto, records_table, with_rows
from planner.economics import spot_evidence
from planner.economics.inputs import estimate_error
from planner.load.catalog import Catalog
from planner.physics.hardware_shape import layout_text
from planner.schema.scenario import Scenario
from planner.schema.workload import Workload

RUNNER_UPS = 3
"""Runner-ups a plan reports per workload: the cheapest candidate of each of the cheapest kinds (instance
type, market) other than the winner's, the JSON's `alternatives`. Generation prices enough to find them
exactly; the cheapest of a kind is always the cheapest of its twins, so no dearer twin is ever needed."""


@dataclass
class CandidateSet:
    """Evaluated candidates (`all`), what the solver sees (`pruned`), and why workloads failed."""

    all: pd.DataFrame
    pruned: pd.DataFrame
    infeasible: dict[str, str] = field(default_factory=dict)
    considered: int = 0  # (offer, nodes, market) rows before any cost evaluation
    # serving options (`endpoints.py`)
    endpoints: pd.DataFrame = field(default_factory=pd.DataFrame)
    traffic: dict = field(default_factory=dict)  # endpoint name -> its Endpoint
    # rows left unpriced (`lazy`), and rows priced exactly: through the cost model, kept or not
    pending: Pending | None = None
    priced: int = 0

    def refresh(self, pending: Pending, priced: int) -> None:
        """The tables again after `pending` priced `priced` more rows."""
        self.all, self.pruned = pending.tables()
        self.priced += priced


def candidate_records(
    workload: Workload,
    catalog: Catalog,
    scenario: Scenario,
    offers: pd.DataFrame,
    limits: Limits,
    exhaustive: bool = False,
    offers_key: str | None = None,
    prices: dict[str, np.ndarray] | None = None,
    cache: CandidateCache | None = None,
    calendar: Calendar | None = None,
) -> tuple[list[dict], str, int]:
    """(evaluated feasible candidates, one dict each; reason if none; rows considered). Dicts, so a caller that
    keeps few of many (`planner batch`) makes one table at the end (`records_table`).

    Rows are screened with closed-form cost bounds (lo <= exact cost <= hi) and only those
    no other row provably beats get the exact cost model, cheapest bound first.
    `exhaustive` evaluates every row exactly (tests compare the two). `offers_key`
    (`offers_token(offers)`) lets repeated calls reuse the price-independent work, and `prices`
    (`offer_prices(offers)`) the offers' prices as arrays. With a `calendar` (`planner batch`) a row is
    beaten only by a candidate booked for no more steps than the row can take. No runner-ups are priced:
    what a calendar needs besides the cheapest are the faster rows, which stay.
    """
    return _workload_candidates(
        workload,
        catalog,
        scenario,
        offers,
        limits,
        exhaustive,
        offers_key,
        offer_prices(offers) if prices is None else prices,
        (cache or CandidateCache()).bind(catalog),
        0,
        calendar,
    )[:3]


@dataclass
class _Ranked:
    """The rows still in the running as one record of arrays, entry i of each about the same row: which row of
    the workload's `Rows` it is (`at`), its timing key, its cost's lower bound, nodes, signature, limited GPUs,
    the fewest calendar steps it can be booked for (its failure-free time without a calendar) and whether it may
    still be on the Pareto front; once ranked for pricing, also its spot twin's place (-1: none) and its place
    cheapest bound first. `take` keeps every field in step."""

    at: np.ndarray
    key: np.ndarray
    lo: np.ndarray
    nodes: np.ndarray
    signature: np.ndarray
    units: np.ndarray
    fastest: np.ndarray
    front: np.ndarray
    twin: np.ndarray | None = None
    by_bound: np.ndarray | None = None

    def take(self, index: np.ndarray) -> _Ranked:
        """The entries `index` picks (a mask, or places in the order it gives them), in every field alike."""
        picked = {f.name: getattr(self, f.name) for f in fields(self)}
        return _Ranked(
            **{name: None if a is None else a[index] for name, a in picked.items()}
        )


def _workload_candidates(
    workload: Workload,
    catalog: Catalog,
    scenario: Scenario,
    offers: pd.DataFrame,
    limits: Limits,
    exhaustive: bool,
    offers_key: str | None,
    prices: dict[str, np.ndarray],
    cache: CandidateCache,
    runner_ups: int,
    calendar: Calendar | None = None,
    lazy: bool = False,
) -> tuple[
    list[dict], str, int, tuple[np.ndarray, np.ndarray, bool] | None, Deferred | None
]:
    """`candidate_records` plus each candidate's signature number and limited GPUs, which the rows already
    carry, and whether no group ties the workload to a provider or region: `pareto`'s arguments. Per-row work
    is on arrays, since a sweep repeats it at every point. Rows are priced cheapest bound first; one is skipped
    once a candidate priced beats it for sure, unless it could still be one of the `runner_ups` cheapest other
    kinds (`Kinds`) the report lists. On a `calendar` a cheaper candidate beats a row only if it is booked for no
    more steps than the row's failure-free time takes (no booking is shorter): a dearer but faster row can still
    be what fits a schedule."""
    rows = expanded_rows(workload, catalog, offers, limits, offers_key, cache)
    none: list[dict] = []
    if not rows.size:
        return none, rows.reason, rows.considered, None, None
    headroom, hw_rate = (
        scenario.defaults.vram_headroom,
        scenario.defaults.hardware_failure_per_gpu_h,
    )
    q, budget = scenario.defaults.deadline_confidence, workload.time_budget or math.inf
    error = estimate_error(workload, scenario.defaults)
    price, lam, fallback_price = row_prices(
        rows, prices, workload.interruption_tolerance == "stateless"
    )
    state = hashlib.sha1(
        lam.tobytes()
    ).digest()  # the preemption state: what screening depends on
    at = (
        np.arange(len(price))
        if exhaustive
        else cheapest_twins(rows, price, lam, fallback_price)
    )
    physics = physics_of(rows, workload, catalog, headroom)
    fingerprint = cost_fingerprint(workload, hw_rate, error)
    screen = screen_of(rows, workload, physics, lam, state, fingerprint)
    # estimate only the shapes of rows that may be on the front (all when none may: the reasons read them)
    screened = False  # `at` is what the screen below keeps, all of it on the front
    if not (exhaustive or physics.done[rows.shape[at]].all()):
        unbeaten = unbeaten_rows(
            rows,
            at,
            physics,
            screen,
            workload,
            price,
            lam,
            fallback_price,
            hw_rate,
            budget,
            q,
            calendar,
            catalog,
            cache,
            scenario,
            runner_ups,
        )
        if unbeaten.any():  # with runner-ups the front is told below
            at, screened = at[unbeaten], not runner_ups
    physics.estimated(rows.shape[at], rows, catalog, cache)
    work_h, item_h = rows.work_h(physics.work_h[rows.shape]), physics.item_h[rows.shape]
    fits = work_h[at] < math.inf
    if not fits.any():
        estimates = [physics.estimates[i] for i in pd.unique(rows.shape[at])]
        return (
            none,
            physics_reason(workload, estimates, budget),
            rows.considered,
            None,
            None,
        )
    at = at[fits]
    key = screen.code[at]
    bound = screened_bounds(screen, at, rows, workload, physics, lam, hw_rate)
    column = rows.columns
    on_time = bound["t0"] <= reach(budget, q, error)
    if not on_time.any():
        slow = pd.DataFrame(
            {"t0": bound["t0"], "nodes": column["nodes"][at], "key": column["key"][at]}
        )
        return (
            none,
            too_slow_reason(workload, slow, budget, q, error),
            rows.considered,
            None,
            None,
        )
    at, key, bound = (
        at[on_time],
        key[on_time],
        {c: v[on_time] for c, v in bound.items()},
    )
    lo, hi = cost_bounds(rows, at, bound, price, lam, fallback_price, workload, hw_rate)
    # the fewest steps it can be booked for: t0 times this (`reach`)
    stretch = error.factor(q)
    ranked = _Ranked(
        at,
        key,
        lo,
        column["nodes"][at],
        rows.signature[at],
        rows.units[at],
        calendar.steps(bound["t0"] * stretch) if calendar else bound["t0"],
        np.ones(len(at), dtype=bool),
    )
    if not (exhaustive or screened):
        certain = sure_rows(
            bound, budget, q, uncertain_rows(rows, at, workload, scenario), error
        )
        booked = (
            calendar.steps(
                booked_at_most({c: v[certain] for c, v in bound.items()}, q, error)
            )
            if calendar
            else None
        )
        ranked.front &= ~dominated(
            ranked.signature,
            ranked.units,
            ranked.lo,
            ranked.signature[certain],
            ranked.units[certain],
            hi[certain],
            *((ranked.fastest, booked) if calendar else (None, None)),
            anywhere=not rows.grouped,
        )
        if not runner_ups:  # nothing beaten is priced
            ranked = ranked.take(ranked.front)
    at, lo = ranked.at, ranked.lo
    twin = spot_twins(rows, at)
    ties = (at, ranked.nodes, rows.market_rank[at], rows.key_rank[at])
    # each row's place cheapest bound first, as listed
    ranked.by_bound = np.argsort(np.lexsort((*ties, lo)))
    # a fallback row after its twin
    order = np.lexsort((*ties, np.where(twin >= 0, np.maximum(lo, lo[twin]), lo)))
    ranked.twin = twin
    ranked = ranked.take(order)
    # positions in the new order
    ranked.twin = np.where(ranked.twin >= 0, np.argsort(order)[ranked.twin], -1)
    at = ranked.at
    columns = [rows.columns[c][at].tolist() for c in ROW_COLUMNS]
    compute_h = physics.work_h[rows.shape]
    columns += [
        a[at].tolist() for a in (price, lam, work_h, item_h, fallback_price, compute_h)
    ]
    out, chosen = [], []
    # why priced rows are not candidates, each (position, what the reason reads); rows refused unpriced
    missed, runaway, unheld, risky, refused = [], [], [], [], []
    # then every fallback row's spot twin is a row too
    spot_allowed = workload.allows_market("spot")
    traces = spot_evidence.catalog_traces(catalog)
    held = held_to_traces(rows, at, workload, scenario)
    risk = risk_of(workload, scenario)
    # under a minimum saving a candidate beats only rows as risky as it, which its saving is no test of
    safety = (
        np.array([SAFETY[m] for m in rows.columns["market"][at]])
        if risk.min_spot_saving
        else None
    )
    kinds = Kinds(runner_ups, rows.kind[at])
    spot_priced: dict[
        int, int
    ] = {}  # position of a spot candidate -> the calendar steps it is booked for
    listed = list(map(Row._make, zip(*columns)))
    # what pricing reads besides the rows, kept without the workload's expanded rows (`Deferred` outlives them)
    exacts, estimates, shapes = screen.exact, physics.estimates, rows.shape[at]
    considered = rows.considered
    best = [math.inf]  # the cheapest candidate priced so far
    # a candidate drawing on no limit beats rows of every signature (`dominated`)
    anywhere = not rows.grouped

    def off_front_by_twin(i: int) -> None:
        """A fallback row whose priced spot twin costs less for sure is off the front (only screening keeps it)."""
        if ranked.front[i] and ranked.twin[i] in spot_priced and safety is None:
            t = ranked.twin[i]
            if (
                ranked.signature[t] == ranked.signature[i]
                and ranked.units[t] <= ranked.units[i]
                and spot_priced[t] <= ranked.fastest[i]
            ):
                ranked.front[i] = not dearer_than_twin(
                    exacts[ranked.key[t]], listed[i], budget, cache
                )

    def price(i: int, for_reason: bool = False) -> None:
        """Row i through the exact cost model: a candidate, or a reason it is not one. A held spot or fallback row its
        replays turn down whatever it costs is left unpriced (`refused`), and priced only `for_reason`: why no
        row is a candidate, where none is."""
        row = listed[i]
        exact = exacts.get(ranked.key[i])
        if exact is None:
            exact = exacts[ranked.key[i]] = exact_of(
                workload, row, hw_rate, fingerprint, cache
            )
        if row.fallback and spot_allowed and not exact.switches(budget, cache):
            return  # spot alone in effect: its twin is the candidate
        if held[i] and not for_reason:
            evidence = replay_evidence(exact, row, budget, traces)
            if refused_unpriced(exact, evidence, budget, q, cache, row.fallback):
                refused.append(i)
                return
        cache.priced += 1
        unit = exact.at(budget, cache)
        if (
            unit is None
            or row.fallback
            and unit.p_switch < FALLBACK_MIN_SWITCH
            and spot_allowed
        ):
            return  # a fallback that practically never switches is its spot twin, where that may be bought
        evidence = None  # its replays, where it is held to them and passes
        if unit.p_deadline < q:
            missed.append((i, (row, unit)))
        elif (
            not unit.billed_node_h * np.fmax(row.price, row.fallback_price)
            <= MAX_CANDIDATE_USD
        ):  # inf, NaN
            runaway.append((i, row))
        elif held[i] and (
            why := why_unheld(
                evidence := replay_evidence(exact, row, budget, traces), unit, q
            )
        ):
            unheld.append((i, (row, why)))
        else:
            est = estimates[shapes[i]]
            candidate = candidate_row(
                workload,
                catalog,
                row,
                unit,
                est.memory.total,
                est.precision,
                layout_text(est),
                exact.inputs.spot_share,
                evidence,
            )
            if why := too_risky(
                candidate, risk, scenario.defaults.spot_placement_scores
            ):
                risky.append((i, (row, why)))
                return
            out.append(candidate)
            chosen.append(i)
            kinds.priced(i, candidate["cost_usd"])
            best[0] = min(best[0], candidate["cost_usd"])
            if not exhaustive:  # what it beats for sure is not on the front
                # `dominated` by this one candidate, written out: it runs per candidate
                rest = slice(i + 1, None)
                beaten = (ranked.lo[rest] > candidate["cost_usd"]) & (
                    anywhere & (ranked.units[i] == 0)  # it draws on no limit
                    | (ranked.signature[rest] == ranked.signature[i])
                    & (ranked.units[rest] >= ranked.units[i])
                )
                steps = calendar.steps(calendar.booked_h(candidate)) if calendar else 0
                if calendar:  # only by a candidate booked for no more steps
                    beaten &= ranked.fastest[rest] >= steps
                if safety is not None:
                    beaten &= safety[rest] <= safety[i]
                ranked.front[rest] &= ~beaten
                if row.market == "spot":
                    spot_priced[i] = steps

    # lazily: a front row dearer by its bound than the cheapest candidate is left for the plan's LP to ask for
    lazy = lazy and safety is None and not (exhaustive or calendar)
    deferred: list[int] = []
    for i in range(len(listed)):
        off_front_by_twin(i)
        if kinds.needed(i, ranked.lo[i]) or (
            ranked.front[i] and not (lazy and ranked.lo[i] > best[0])
        ):
            price(i)
        elif ranked.front[i]:
            deferred.append(i)

    def finish() -> tuple[
        list[dict], str, int, tuple[np.ndarray, np.ndarray, bool] | None
    ]:
        kept = saving_kept(out, risk)
        found, picked = [out[j] for j in kept], [chosen[j] for j in kept]
        if not found:
            for i in refused:  # priced now, for the reason
                price(i, for_reason=True)
            refused.clear()
            return (
                none,
                priced_reason(
                    workload,
                    q,
                    *(
                        [entry for _, entry in sorted(reasons, key=lambda e: e[0])]
                        for reasons in (missed, runaway, unheld, risky)
                    ),
                ),
                considered,
                None,
            )
        # the table lists candidates by bound, twins or not
        in_bound_order = np.argsort(ranked.by_bound[picked])
        found = [found[j] for j in in_bound_order]
        picked = np.array(picked)[in_bound_order]
        return (
            found,
            "",
            considered,
            (ranked.signature[picked], ranked.units[picked], anywhere),
        )

    if not deferred:
        return (*finish(), None)

    def price_more(positions: Iterable[int]) -> list[float]:
        """Price these rows; each one's cost as a candidate (inf where it is none)."""
        costs = []
        for i in sorted(positions):
            off_front_by_twin(i)
            before = len(out)
            if ranked.front[i]:
                price(i)
            costs.append(out[-1]["cost_usd"] if len(out) > before else math.inf)
        return costs

    # the deferred rows' own, no more: a class's expanded rows and physics are many megabytes
    listed = {i: listed[i] for i in deferred}
    estimates = {shapes[i]: estimates[shapes[i]] for i in deferred}
    # why rows were not candidates is read only where there is none
    for reasons in (missed, runaway, unheld, risky, refused):
        reasons.clear()
    return (
        *finish(),
        Deferred(
            np.array(deferred),
            ranked.lo[deferred],
            list(listed.values()),
            price_more,
            finish,
        ),
    )


def generate(
    scenario: Scenario,
    catalog: Catalog,
    offers: pd.DataFrame | None = None,
    exhaustive: bool = False,
    progress=None,
    cache: CandidateCache | None = None,
    runner_ups: int = RUNNER_UPS,
    time_limit_s: float | None = None,
    lazy: bool = False,
) -> CandidateSet:
    """All workloads' candidates; `offers` defaults to the catalog's with the scenario's overrides applied.
    `time_limit_s` bounds building the endpoints' options (`endpoint_options`), where many distinct ones add up.
    `progress(done, total)` is called after each workload (a progress bar); `cache` keeps the work for
    the caller's next call (a what-if point), else it lasts this call. `all` holds each workload's cheapest
    `runner_ups` kinds (instance type and market) besides its winner, as exhaustive pricing would find them,
    and what the screening could not rule off the Pareto front; 0 (nobody reads runner-ups) prices only that.
    `lazy` leaves front rows dearer by their bound than a priced candidate unpriced, in `pending`, for the
    plan's LP to ask for (`solve/lazy.py`)."""
    cache = (cache or CandidateCache()).bind(catalog)
    priced_before = cache.priced
    limits = limits_of(scenario)
    if offers is None:
        offers = apply_overrides(catalog.offers, scenario.overrides, catalog)
    token = offers_token(offers) if offers["key"].is_unique else None
    prices = offer_prices(offers)
    infeasible, considered = {}, 0
    # workloads identical but for their names are generated once
    classes: dict[tuple, int] = {}
    results: list[ClassResult] = []
    members: list[tuple[int, str]] = []
    deferred: dict[int, Deferred] = {}
    for number, workload in enumerate(scenario.workloads):
        if progress:
            progress(number, len(scenario.workloads))
        if workload.serving:
            continue
        kind = (
            workload.model_dump_json(exclude={"name", "description"}),
            grouped(workload, limits),
        )
        if kind not in classes:
            classes[kind] = len(results)
            records, reason, count, limited, later = _workload_candidates(
                workload,
                catalog,
                scenario,
                offers,
                limits,
                exhaustive,
                token,
                prices,
                cache,
                runner_ups,
                lazy=lazy,
            )
            if later is not None:
                deferred[classes[kind]] = later
            frame = records_table(records)
            front = pareto(frame, *limited) if limited is not None else frame
            bought = pd.DataFrame()
            if scenario.purchase_options:  # each option its own offer: on the front
                bought = records_table(
                    purchase_records(workload, catalog, scenario, offers, limits, cache)
                )
                if len(bought):
                    frame, front, reason = (
                        with_rows(frame, bought),
                        with_rows(front, bought),
                        "",
                    )
            results.append(
                ClassResult(frame, reason, count, front, workload.name, bought)
            )
        result = results[classes[kind]]
        considered += result.considered
        if result.reason:
            infeasible[workload.name] = result.reason
        else:
            members.append((classes[kind], workload.name))
    options, traffic, unserved = endpoint_options(
        scenario, catalog, offers, time_limit_s=time_limit_s
    )
    infeasible.update(unserved)
    pending = Pending(results, members, deferred)
    every, front = pending.tables()
    return CandidateSet(
        every,
        front,
        infeasible,
        considered,
        options,
        traffic,
        pending if deferred else None,
        cache.priced - priced_before,
    )
