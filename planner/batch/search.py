"""How `planner batch` spends its time limit: the reservation pools first, then the rest.

On a quarter with reservation pools most of the money is in which runs share the bought
nodes, but CP-SAT on the whole model spreads its search over hundreds of cheap runs and
packs the pools poorly (the 200-run benchmark: $661k after 60 s against a $608k bound).
Packing the pools alone, then scheduling everything around them, then letting CP-SAT
improve the whole, does much better in the same minute. So, unless a short first attempt
proves optimality, the search runs in phases over the one time limit:

0. the whole model, from the caller's hint (small quarters end here, proven optimal); where the
   greedy schedule of the hint is better than what it found, that schedule checked with every choice fixed;
1. the pools packed three ways:
   a. the core alone (runs that can use a pool and wait for no other run) on each run's
      fewest-node pieces (tight packing, any number of nodes bought);
   b. the core in the neighbourhood of the bound's LP: the LP's nodes bought, and only the
      pooled candidates it uses, near the starts it uses (a small model CP-SAT often solves
      outright; on the 200-run benchmark it finds the plans with an odd node bought that
      fewest-node pieces cannot fill);
   c. the same with the runs the LP puts on a pool and every run they wait for, where that is
      more than the core (the LP fills bought nodes with fine-tunes after their pretrains too;
      b stays, as this larger model can run out of its share first);
   d. where b and c cannot run (the LP ended at no leaf, or not in time: a 500-run quarter's LP
      takes about 20 s here) and the packing of a bought nodes, the core again with every pool at
      its fewest nodes, the other side of what bought nodes are worth (a work-limited search of the
      core settles on one side: two nodes bought at $2.126M on one generated 500-run quarter, where
      none bought packs it for $2.092M);
2. around each packing the rest placed by the greedy (checked with every choice fixed), or where the
   greedy cannot place every required run, the whole model with the better packing's candidates,
   starts and bought nodes fixed;
3. the whole model, free, from the cheaper of phase 2's schedule (even if it left optional runs
   out) and the best before it;
4. the bound's LP with every start and node count whole (`bound.packed`, HiGHS's branch and cut in
   the bound's thread), once it has finished: its packed runs fixed where it puts them, the rest
   scheduled around them by CP-SAT, the cheaper of that and phase 3's kept (two 200-run benchmark
   quarters: 1.1 % and 0.9 % cheaper, where no packing near the LP beat buying nothing).

Only phases 0 and 3 search the whole model, so only their bounds are reported (and the LP's). Last, the best
schedule's runs start as soon as its cost allows (`soonest`): a search stops at any of the
schedules of equal cost, and they differ only in when runs start.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time

import pandas as pd

from planner.batch.background import Background
from planner.batch.bound import Relaxation, packed, relax
from planner.batch.greedy import endpoint_occupancy, greedy
from planner.batch.model import (
    BatchLimits,
    Pool,
    QuarterEndpoints,
    RunInfo,
    build_batch_model,
    solve_batch,
)
from planner.batch.tie_break import soonest
from planner.candidates.limits import COST_RESOLUTION_USD
from planner.solve.outcome import BatchResult

log = logging.getLogger(__name__)

# Shares of the time limit: the first attempt, the core's tight packing, each packing near the LP, the packing
# fixed; phase 3 gets the rest.
FIRST_SHARE, CORE_SHARE, NEIGHBOURHOOD_SHARE, FIXED_SHARE = 0.05, 0.25, 0.15, 0.10
SOONEST_SHARE = 0.05  # the tie-break on start times (`soonest`), after the search
# The LP's integer packing is waited for until this share of the time limit has passed (after phase 3): its
# search then has its FIXED_SHARE, the tie-break its SOONEST_SHARE.
PACKING_BY = 0.85
# The LP's starts are widened by this fraction of each candidate's duration each side.
NEIGHBOURHOOD_WIDTH = 0.4
# The phases are limited by CP-SAT's deterministic work, not by the clock, so a quarter gets
# the same plan however busy the machine is; each phase's share of the clock only caps it.
# Work per second of that share, about 70 % of what one worker does on the 200-run benchmark
# beside the bound's LP (the whole model: about 0.11 units a second; the smaller core, or
# the whole with the core fixed: 0.5), so that there the work ends each phase first.
# Larger quarters reach the clock first and then depend on timing.
WHOLE_WORK_PER_SECOND, CORE_WORK_PER_SECOND = 0.07, 0.38


def core_runs(cands: pd.DataFrame, runs: list[RunInfo]) -> list[RunInfo]:
    """Runs that have a reserved candidate and come after no other run."""
    pooled = set(cands.loc[cands["pool"] >= 0, "run"])
    return [r for r in runs if r.name in pooled and not r.after]


def _small_pieces(cands: pd.DataFrame) -> pd.DataFrame:
    """Of each run's reserved candidates, only those on the fewest nodes: small pieces pack the
    bought nodes tightly (the 200-run benchmark's core: $601k against $605-609k with every
    size); the whole model afterwards may still change sizes."""
    pooled = cands["pool"] >= 0
    fewest = cands[pooled].groupby(["run", "pool"])["nodes"].transform("min")
    keep = ~pooled
    keep[pooled] = cands.loc[pooled, "nodes"] == fewest
    return cands[keep]


def _log(phase: str, result: BatchResult, started: float) -> BatchResult:
    log.debug(
        "%s: %s $%.2f bought %s at %.1f s",
        phase,
        result.status,
        result.objective_usd,
        result.bought,
        time.perf_counter() - started,
    )
    return result


def _priority(result: BatchResult, runs: dict[str, RunInfo]) -> int:
    return sum(runs[n].priority for n in result.chosen["run"] if not runs[n].required)


def _solved(result: BatchResult | None) -> bool:
    return result is not None and result.solved


def _as_hint(result: BatchResult, runs: set[str] | None = None) -> dict:
    chosen = (
        result.chosen
        if runs is None
        else result.chosen[result.chosen["run"].isin(runs)]
    )
    hint = {
        "cids": set(chosen["cid"]),
        "starts": dict(zip(chosen["run"], chosen["start_step"].astype(int))),
        "bought": result.bought,
        "serving": result.serving,
    }
    if runs is not None:
        hint["runs"] = runs
    return hint


def solve_in_phases(
    cands: pd.DataFrame,
    runs: list[RunInfo],
    pools: list[Pool],
    limits: BatchLimits,
    steps: int,
    time_limit_s: float = 60.0,
    workers: int = 1,
    seed: int = 0,
    hint: dict | None = None,
    endpoints: QuarterEndpoints | None = None,
    endpoint_floor_usd: float = 0.0,
) -> BatchResult:
    """The best schedule over the phases; its bound is the best valid one (CP-SAT on the whole
    model, or the time-indexed LP when every run is scheduled). The LP runs in a thread beside
    the search until the search ends (HiGHS and CP-SAT both release the GIL). The LP knows only
    the runs: with `endpoints`, their own lower bound `endpoint_floor_usd` is added to it (both
    relax the limits the runs and endpoints share, so the sum is still a bound)."""
    started = time.perf_counter()
    whole = build_batch_model(cands, runs, pools, limits, steps, endpoints)
    core = core_runs(whole.cands, runs)
    phased = bool(pools) and 0 < len(core) < len(runs)

    ran: list[
        BatchResult
    ] = []  # every phase, to tell whether the clock cut any (`BatchResult.clocked`)

    def search(
        model,
        share: float,
        start: dict | None,
        fix_hint: bool = False,
        last: bool = False,
    ) -> BatchResult:
        """One phase: its share of the work, capped by its share of the clock (the last phase: what is left)."""
        # `soonest` last
        left = max(
            1.0, (1 - SOONEST_SHARE) * time_limit_s - (time.perf_counter() - started)
        )
        rate = (
            WHOLE_WORK_PER_SECOND
            if model is whole and not fix_hint
            else CORE_WORK_PER_SECOND
        )
        ran.append(
            solve_batch(
                model,
                left if last else min(left, share * time_limit_s),
                workers,
                seed,
                start,
                fix_hint,
                work_limit=share * time_limit_s * rate,
            )
        )
        return ran[-1]

    def finish(best: BatchResult, searched: list[BatchResult], *bound) -> BatchResult:
        work = 0.0  # the tie-break's
        if _solved(best):
            best, work = soonest(
                best,
                _as_hint(best),
                whole.cands,
                runs,
                pools,
                limits,
                steps,
                endpoints,
                workers,
                seed,
                SOONEST_SHARE * time_limit_s * CORE_WORK_PER_SECOND,
                started + time_limit_s,
            )
            _log("soonest", best, started)
        done = _finish(best, searched, whole, started, *bound)
        clocked = any(r.clocked for r in ran) or relaxed.late
        return dataclasses.replace(
            done,
            clocked=done.status != "OPTIMAL" and clocked,
            deterministic_seconds=done.deterministic_seconds + work,
        )

    packing_by = started + PACKING_BY * time_limit_s
    with Background(
        functools.partial(relax, keep_lp=phased, quotas=limits.gpu_quotas)
        if pools
        else None,
        whole.cands,
        runs,
        pools,
        steps,
        time_limit_s - (time.perf_counter() - started),
        # phase 4's packing, from the LP kept for it
        then=(
            lambda relaxation, stop: packed(
                relaxation, packing_by - time.perf_counter(), stop
            )
        )
        if phased
        else None,
    ) as relaxed:
        first = _log(
            "whole",
            search(whole, FIRST_SHARE if phased else 1.0, hint, last=not phased),
            started,
        )
        if (
            first.status == "UNKNOWN"
            and hint
            and (not pools or time.perf_counter() - started >= time_limit_s)
        ):
            fallback = greedy_result(whole, hint)
            return finish(fallback, [first, fallback])
        if first.status not in ("FEASIBLE", "UNKNOWN") or not pools:
            return finish(first, [first])
        results, best = [first], first
        if hint and (
            not _solved(first)
            or _key(greedy_result(whole, hint), whole) < _key(first, whole)
        ):
            # the greedy schedule is better than what the first attempt found: CP-SAT checks it against every
            # constraint (the greedy does not check them all), and where it holds, the phases start from it. With
            # the schedule fixed its OPTIMAL proves nothing, so it lends no bound (not in `results`).
            checked = _log(
                "greedy checked",
                search(whole, FIXED_SHARE, hint, fix_hint=True, last=True),
                started,
            )
            if _solved(checked):
                best = dataclasses.replace(checked, status="FEASIBLE")
        if phased:
            around = _around_the_packings(
                whole,
                core,
                limits,
                steps,
                search,
                started,
                relaxed,
                NEIGHBOURHOOD_SHARE * time_limit_s,
                hint,
            )
            if _solved(around) and (
                not _solved(best) or _key(around, whole) < _key(best, whole)
            ):
                best = around
            # From the cheaper of the core's packing and the best so far: the packing even when it left optional
            # runs out (this phase can add them back), the greedy schedule where fixing the core cost more.
            start = (
                around
                if _solved(around)
                and (not _solved(best) or around.objective_usd <= best.objective_usd)
                else best
            )
            final = _log(
                "whole again",
                search(
                    whole,
                    1
                    - FIRST_SHARE
                    - CORE_SHARE
                    - 2 * NEIGHBOURHOOD_SHARE
                    - FIXED_SHARE,
                    _as_hint(start) if _solved(start) else hint,
                    last=True,
                ),
                started,
            )
            results.append(final)
            if _solved(final) and (
                not _solved(best) or _key(final, whole) <= _key(best, whole)
            ):
                best = final
            if relaxed.first is not None:
                fixed = _around_the_integer_packing(
                    whole, relaxed, packing_by, search, started, hint
                )
                if _solved(fixed) and (
                    not _solved(best) or _key(fixed, whole) < _key(best, whole)
                ):
                    best = fixed
        relaxation = relaxed.finish()
        if (
            not _solved(best) and hint
        ):  # the clock ran out before CP-SAT completed any schedule
            best = greedy_result(whole, hint)
            results.append(best)
        return finish(best, results, relaxation, endpoint_floor_usd)


def _around_the_packings(
    whole,
    core: list[RunInfo],
    limits: BatchLimits,
    steps: int,
    search,
    started: float,
    relaxed: Background,
    wait_s: float,
    hint: dict | None,
) -> BatchResult | None:
    """Phases 1 and 2: pack the pools (two or three ways), then schedule the rest around the better packing
    (the endpoints, if any, are in every phase, from the caller's hint)."""
    names = {r.name for r in core}
    core_cands = whole.cands[whole.cands["run"].isin(names)]
    small = build_batch_model(
        _small_pieces(core_cands), core, whole.pools, limits, steps, whole.endpoints
    )
    placed = (hint or {}).get("serving")
    held = (
        endpoint_occupancy(
            whole.endpoints.options, placed, whole.endpoints.windows, limits
        )
        if whole.endpoints is not None
        else []
    )
    start = greedy(small.cands, core, whole.pools, limits, steps, held)
    if placed is not None:
        start["serving"] = placed
    # (the packing, the runs it packs)
    packings = [
        (
            _log(
                "core",
                search(small, CORE_SHARE, None if start["failed_required"] else start),
                started,
            ),
            names,
        )
    ]
    # Waiting for the bound here keeps the plan independent of the clock unless the LP is slow.
    relaxation = relaxed.wait(wait_s)
    fewest = [p.min_nodes for p in whole.pools]
    if (relaxation is None or not relaxation.starts) and (
        _solved(packings[0][0]) and list(packings[0][0].bought) != fewest
    ):
        # No packing near the LP (it ended at no leaf, or not in time) and the core's search bought nodes: the
        # core packed with the fewest bought too, the other side of what bought nodes are worth, where its search
        # may have settled on one side (a 500-run quarter's core: two nodes bought at $2.126M, none at $2.092M)
        unbought = [dataclasses.replace(p, max_nodes=p.min_nodes) for p in whole.pools]
        alone = build_batch_model(
            small.cands, core, unbought, limits, steps, whole.endpoints
        )
        alone_start = greedy(alone.cands, core, unbought, limits, steps, held)
        if placed is not None:
            alone_start["serving"] = placed
        packings.append(
            (
                _log(
                    "core, the fewest nodes bought",
                    search(
                        alone,
                        NEIGHBOURHOOD_SHARE,
                        None if alone_start["failed_required"] else alone_start,
                    ),
                    started,
                ),
                names,
            )
        )
    if relaxation is not None and relaxation.starts:
        pools = [
            dataclasses.replace(p, min_nodes=b, max_nodes=b)
            for p, b in zip(whole.pools, relaxation.bought)
        ]
        on_pools = _on_the_lp_pools(whole, core, relaxation)
        for label, packed in zip(
            ("core", "pools"), [core] + [on_pools] * (len(on_pools) > len(core))
        ):
            packed_names = {r.name for r in packed}
            near = _near_the_relaxation(
                whole.cands[whole.cands["run"].isin(packed_names)], relaxation
            )
            model = build_batch_model(
                near, packed, pools, limits, steps, whole.endpoints
            )
            packings.append(
                (
                    _log(
                        f"{label} near the LP",
                        search(model, NEIGHBOURHOOD_SHARE, None),
                        started,
                    ),
                    packed_names,
                )
            )
    # The rest placed by the greedy around each packing, checked by CP-SAT with every choice fixed; CP-SAT
    # schedules the rest around the best packing (the next when a packed run's followers no longer fit) only
    # where the greedy cannot place every required run. Within its share of work CP-SAT had left optional runs
    # out that fit and put fine-tunes on dearer candidates (a 500-run quarter: 14 runs out, 12 % dearer).
    packed_in_order = sorted(
        (pn for pn in packings if _solved(pn[0])), key=lambda pn: _key(pn[0], whole)
    )
    best = None
    for packed, packed_names in packed_in_order:
        rest = greedy(
            whole.cands,
            list(whole.runs.values()),
            whole.pools,
            limits,
            steps,
            held,
            fixed=_as_hint(packed, packed_names),
        )
        if rest["failed_required"]:
            continue
        rest["serving"] = placed
        checked = _log(
            "packing fixed, the rest by the greedy",
            search(whole, FIXED_SHARE, rest, fix_hint=True),
            started,
        )
        if _solved(checked) and (
            not _solved(best) or _key(checked, whole) < _key(best, whole)
        ):
            best = dataclasses.replace(checked, status="FEASIBLE")
    if _solved(best):
        return best
    for packed, packed_names in packed_in_order:
        best = _log(
            "packing fixed",
            search(whole, FIXED_SHARE, _as_hint(packed, packed_names), fix_hint=True),
            started,
        )
        if _solved(best):
            break
    return best


def greedy_result(whole, schedule: dict) -> BatchResult:
    """The greedy schedule CP-SAT started from, as a FEASIBLE result: the plan a short time limit still
    returns. Its bound is each scheduled run's cheapest candidate (reservations cost nothing there)."""
    chosen = whole.cands[whole.cands["cid"].isin(schedule["cids"])].copy()
    chosen["start_step"] = [schedule["starts"][r] for r in chosen["run"]]
    bought = list(schedule["bought"])
    reservations = (
        sum(p.cents_per_node * b for p, b in zip(whole.pools, bought))
        * COST_RESOLUTION_USD
    )
    serving = schedule.get("serving")
    serving = serving if serving is not None else pd.DataFrame()
    objective = (
        float(chosen["cost_usd"].sum())
        + reservations
        + (float(serving["cost_usd"].sum()) if len(serving) else 0)
    )
    cheapest = whole.cands.groupby("run")["cost_usd"].min()
    bound = min(objective, float(cheapest.reindex(chosen["run"]).sum()))
    unscheduled = sorted(set(whole.runs) - set(chosen["run"]))
    return BatchResult(
        "FEASIBLE",
        objective,
        bound,
        chosen=chosen.sort_values("run").reset_index(drop=True),
        bought=bought,
        unscheduled=unscheduled,
        serving=serving,
    )


def _around_the_integer_packing(
    whole, relaxed: Background, packing_by: float, search, started: float, hint
) -> BatchResult | None:
    """Phase 4: the LP's integer packing (`bound.packed`), once its branch and cut has ended (by `packing_by`),
    its runs fixed where it puts them and the rest scheduled around them by CP-SAT (its followers are packed
    without the runs they wait for, which the greedy cannot place before them). FEASIBLE: with the packing
    fixed its OPTIMAL proves nothing."""
    relaxation = relaxed.wait_then(packing_by - time.perf_counter())
    if relaxation is None or not any(relaxation.packing_bought or ()):
        return None
    packing = _integer_packing(whole, relaxation, (hint or {}).get("serving"))
    fixed = _log(
        "the LP's integer packing fixed",
        search(whole, FIXED_SHARE, packing, fix_hint=True),
        started,
    )
    return dataclasses.replace(fixed, status="FEASIBLE") if _solved(fixed) else None


def _integer_packing(
    whole, relaxation: Relaxation, serving: pd.DataFrame | None
) -> dict:
    """The LP's integer packing (`bound.packed`) as a hint that fixes only the runs it packs (`_as_hint`'s)."""
    chosen = whole.cands.loc[list(relaxation.packing)]
    return {
        "cids": set(chosen["cid"]),
        "starts": dict(zip(chosen["run"], relaxation.packing.values())),
        "bought": list(relaxation.packing_bought),
        "serving": serving,
        "runs": set(chosen["run"]),
    }


def _on_the_lp_pools(
    whole, core: list[RunInfo], relaxation: Relaxation
) -> list[RunInfo]:
    """The core, the runs the LP puts on a pool and every run they wait for: on a quarter whose
    fine-tunes follow pretrains the LP fills the bought nodes with fine-tunes too, which a packing of
    the core alone cannot reproduce (a 200-run benchmark quarter: 11 of the LP's 25 pooled runs)."""
    wanted = {r.name for r in core} | set(
        whole.cands.loc[list(relaxation.starts), "run"]
    )
    todo = list(wanted)
    while todo:
        for before in whole.runs[todo.pop()].after:
            if before in whole.runs and before not in wanted:
                wanted.add(before)
                todo.append(before)
    return [r for r in whole.runs.values() if r.name in wanted]


def _near_the_relaxation(cands: pd.DataFrame, relaxation: Relaxation) -> pd.DataFrame:
    """The candidates that do not use a pool, and the pooled ones the LP uses, each limited to
    the LP's starts widened by `NEIGHBOURHOOD_WIDTH` of its duration (rows of `cands` are
    indexed as the bound's were)."""
    used = pd.DataFrame.from_dict(
        relaxation.starts, orient="index", columns=["first_start", "last_start"]
    )
    near = cands.join(used)
    keep = (near["pool"] < 0) | near["first_start"].notna()
    widen = (near["duration_steps"] * NEIGHBOURHOOD_WIDTH).apply(math.ceil)
    near["first_start"] = (near["first_start"] - widen).clip(lower=0)
    near["last_start"] = near["last_start"] + widen
    return near[keep]


def _key(result: BatchResult, whole) -> tuple:
    """More priority of optional runs first, then cheaper."""
    return (-_priority(result, whole.runs), result.objective_usd)


def _finish(
    best: BatchResult,
    searched: list[BatchResult],
    whole,
    started: float,
    relaxation: Relaxation | None = None,
    endpoint_floor_usd: float = 0.0,
) -> BatchResult:
    """`best` with the highest valid bound for its set of runs: from searches of the whole model
    that ended with the same priority, and the LP's for that set (`Relaxation.bound_for`; None when it
    stopped before its first LP or was left out, which `left_out` says) plus the endpoints' own floor."""
    effort = {
        "solve_seconds": time.perf_counter() - started,
        "deterministic_seconds": sum(
            r.deterministic_seconds for r in searched if r is not None
        ),
    }
    if not _solved(best):
        return dataclasses.replace(best, **effort)
    priority = _priority(best, whole.runs)
    searches = [
        r.bound_usd
        for r in searched
        if _solved(r) and _priority(r, whole.runs) == priority
    ]
    # CP-SAT bounds cost less each priority point's weight: below zero it still allows more optional runs
    # than the plan has, and says nothing about the cost of this set of runs
    bounds = [b for b in searches if b >= 0]
    lp = relaxation.bound_for(set(best.chosen["run"])) if relaxation else None
    if lp is not None:
        bounds.append(lp + endpoint_floor_usd)
    optimal = any(r.status == "OPTIMAL" for r in searched)
    bound = (
        best.objective_usd
        if optimal
        else min(best.objective_usd, max(bounds))
        if bounds
        else math.nan
    )
    why = (relaxation.left_out if relaxation else "") or (
        "the search's bound still allows more optional runs"
        if searches and not bounds
        else ""
    )
    return dataclasses.replace(
        best,
        status="OPTIMAL" if optimal else "FEASIBLE",
        bound_usd=bound,
        proved_by="cp-sat" if optimal else "",
        no_bound_why=why,
        **effort,
    )
