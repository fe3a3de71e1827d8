"""Options for serving endpoints: every (offer, tensor-parallel degree, market) that can hold replicas,
with what one node of it serves per request size, what it costs, and how often it is away.

The CP-SAT model (`planner/solve/model.py`) decides how many nodes of each option run in each
traffic period; this module only prices and sizes the options. A node of `gpus_per_node` GPUs
holds `gpus_per_node // tp` replicas; its capacity at a request size is that many times one
replica's (`physics/serving.py`, or the workload's measured figures).

Spot nodes are preempted at the offer's rate λ; a share c of that comes in zone-wide events that
take the whole pool at once (the trace fit of the cost model's §3), and after each the pool waits
m on average for spot capacity, then `restart_overhead` R to start. So each node is away on its
own a share u = λ(1−c)(R+m) / (1 + λ(1−c)(R+m)) of the time and the whole pool a share
z = λc(R+m) / (1 + λc(R+m)) (alternating renewal processes). A spot pool of n nodes is counted for
only the nodes it keeps with probability `availability`, which is how the on-demand floor that
SkyServe sets by hand is priced here; where z alone exceeds 1 − availability, spot counts nothing.

Nothing here grows with the size of a pool: an option's largest pool is found by a search over pool sizes
a few hundred at a time, and a spot option's table of nodes kept (`pool_table`) lists every size of a pool
of up to EXACT_POOL_NODES nodes; a larger pool's table lists only the sizes where its absent count steps up,
exact to EXACT_POOL_NODES and about 1/POOL_SIZE_STEP of the pool apart above (each size counted with the
absences of the next listed one: never more nodes than the pool keeps). So an endpoint of a million
requests a second, whose pools run to hundreds of thousands of nodes, is priced and planned in the memory
and time of one of a few requests a second.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.economics.candidate import billed_hours
from planner.errors import TimeLimitReached
from planner.load.catalog import Catalog, offers_for
from planner.physics import batching, serving
from planner.physics.hardware_shape import gpu_perf, model_shape, resolve_model
from planner.schema.scenario import Scenario
from planner.schema.workload import Workload

TENSOR_PARALLEL = (1, 2, 4, 8)
KEEP_PER_BUCKET = 2
"""Options kept per (endpoint, provider, GPU family, market) and request size: the few cheapest per request
served, and the cheapest node (small nodes fit low rates). Quotas count per provider or GPU family, so
each keeps its own best; the rest cost more for the same capacity under the same limits (a node limit
of one region can still send replicas to the next best)."""
EXACT_POOL_NODES = 1024
"""A spot pool of at most this many nodes has every size in its table (the model indexes the table by the
pool's size, an element constraint); a larger one has the sizes where its absent count steps up."""
POOL_SIZE_STEP = 64
"""Above EXACT_POOL_NODES a spot pool's table steps about 1/POOL_SIZE_STEP of the pool at a time (1.6 %):
a pool of 100,000 nodes is counted with the absences of one up to 1,560 larger, a few dozen nodes (a spot
node away 3 % of the time) of 100,000; about 45 steps per doubling of the pool."""
MOST_POOL_NODES = 10_000_000
"""Nodes of one option at most (ten million nodes, far beyond any cloud's capacity): an option that would
need more to carry an endpoint's peak alone is capped here, as by an offer's `max_nodes`, and keeps every
count the solver adds up well inside 64-bit integers."""


@dataclass(frozen=True)
class Endpoint:
    """An endpoint's traffic in solver terms: rate per (period, bucket), period hours, and totals."""

    name: str
    rates: np.ndarray  # requests/s, shape (periods, buckets)
    hours: np.ndarray  # hours of the day per period
    days: float  # duration in days
    autoscale: bool
    availability: float
    slices: int
    output_tokens: np.ndarray  # per bucket
    weekdays: tuple[
        tuple[int, ...], ...
    ] = ()  # per period, the weekdays it applies to (Monday 0; () = daily)
    max_pools: int = 2  # options it may run on over all periods
    max_providers: int = 1
    pool_usd_per_h: float = (
        0.0  # what each pool it runs on costs to operate, per hour of its duration
    )

    @property
    def day_share(self) -> np.ndarray:
        """Per period, the share of days it applies to (1 for a daily profile, 5/7 for mon-fri)."""
        if not self.weekdays:
            return np.ones(len(self.hours))
        return np.array([len(days) / 7 for days in self.weekdays])

    @property
    def pool_usd(self) -> float:
        """What one pool costs to operate over the endpoint's duration."""
        return self.pool_usd_per_h * self.days * 24

    @property
    def time_share(self) -> np.ndarray:
        """Per period, its share of all the endpoint's time (hours of the day x share of days)."""
        return self.hours / 24 * self.day_share


def all_day_usd(option, endpoint: Endpoint) -> float:
    """One node on all day for the endpoint's duration (spot: with half a granule per preemption)."""
    return option.node_usd_h * 24.0 * endpoint.days


def period_usd(option, endpoint: Endpoint, period: int) -> float:
    """One node added for one period every day it applies to: a billing session of its hours plus a start-up."""
    return (
        option.node_usd_h
        * option.session_h[period]
        * endpoint.days
        * endpoint.day_share[period]
    )


def endpoint_of(workload: Workload) -> Endpoint:
    traffic = workload.traffic
    periods = traffic.periods
    shares = np.array([b.share for b in traffic.buckets])
    rates = np.array([[p.requests_per_s * s for s in shares] for p in periods])
    hours = np.array([p.span[1] - p.span[0] for p in periods])
    return Endpoint(
        workload.name,
        rates,
        hours,
        workload.duration / 24.0,
        workload.autoscale,
        workload.availability,
        traffic.slices,
        np.array([b.output_tokens for b in traffic.buckets], dtype=float),
        tuple(p.weekdays for p in periods) if traffic.weekly else (),
        workload.max_pools,
        workload.max_providers,
        workload.pool_usd_per_h,
    )


def replica_capacities(
    workload: Workload, catalog: Catalog, offer, tp: int, headroom: float
) -> list[serving.Capacity] | None:
    """One replica's capacity per bucket on this offer at `tp` (measured where given); None: not usable."""
    buckets = workload.traffic.buckets
    measured = [
        m
        for m in workload.measured
        if m.tensor_parallel == tp and catalog.gpu_matches(offer.gpu, m.gpu)
    ]
    if measured:
        found = []
        for b in buckets:
            hit = [
                m
                for m in measured
                if (m.prompt_tokens, m.output_tokens)
                == (b.prompt_tokens, b.output_tokens)
            ]
            found.append(
                serving.Capacity(hit[0].max_requests_per_s, "measured", 0)
                if hit
                else None
            )
        if all(f is not None for f in found):
            return found
    arch = resolve_model(workload, catalog)
    if arch is None:
        return None
    replica = replica_of(workload, catalog, offer, tp, headroom)
    slo = workload.slo
    return [
        serving.capacity(
            replica,
            b.prompt_tokens,
            b.output_tokens,
            slo.ttft_s,
            slo.tpot_s,
            slo.quantile,
        )
        for b in buckets
    ]


def replica_of(
    workload: Workload, catalog: Catalog, offer, tp: int, headroom: float
) -> serving.Replica:
    gpu = catalog.gpus[offer.gpu]
    precision = workload.precision
    if precision == "fp8" and not gpu.fp8_tflops:
        precision = "bf16" if workload.fp8_fallback else precision
    return serving.Replica(
        model_shape(resolve_model(workload, catalog)),
        gpu_perf(gpu),
        tp,
        float(offer.gpu_vram_gib),
        offer.intra_node if tp > 1 else "none",
        float(offer.intra_node_gbs) or None,
        precision,
        workload.kv_precision,
        headroom,
    )


def kept_nodes(n: int, away: float, availability: float, zone_away: float = 0.0) -> int:
    """Nodes a pool of n keeps with probability >= availability when each is away a share `away` on its own
    and the whole pool a share `zone_away`: n − d, with d the smallest count of absent nodes such that
    (1 − z)·P(Binomial(n, away) <= d) (+ z when d = n) reaches `availability`."""
    return int(kept_counts(np.array([n]), away, availability, zone_away)[0])


def kept_counts(
    n: np.ndarray, away: float, availability: float, zone_away: float = 0.0
) -> np.ndarray:
    """`kept_nodes` for every pool size in `n` at once: the binomial's quantile by bisection on its CDF (scipy's
    incomplete beta, which stays exact where summing the terms one by one drifts or underflows: pools of
    hundreds of nodes)."""
    from scipy import (
        special,  # here, not at the top: a solve without endpoints never imports SciPy (0.2 s)
    )

    n = np.asarray(n, dtype=np.int64)
    if away <= 0 and zone_away <= 0:
        return n
    target = (availability - 1e-12) / (1 - zone_away) if zone_away < 1 else math.inf
    if (
        target > 1
    ):  # only the whole pool's absence term reaches it: every node may be gone
        return np.zeros_like(n)
    short, enough = _quantile_bracket(
        n, away, target
    )  # absent counts below and at the quantile
    while np.any(open_ := enough - short > 1):
        mid = (short + enough) // 2
        ok = special.bdtr(np.maximum(mid, 0), n, away) >= target
        enough, short = (
            np.where(open_ & ok, mid, enough),
            np.where(open_ & ~ok, mid, short),
        )
    return n - enough


def _quantile_bracket(
    n: np.ndarray, away: float, target: float
) -> tuple[np.ndarray, np.ndarray]:
    """Absent counts below and at the binomial's `target` quantile: a few standard deviations either side of
    the normal approximation where the CDF confirms them (a dozen bisection steps fewer for large pools),
    else -1 and n, which always hold."""
    from scipy import special

    sd = np.sqrt(n * away * (1 - away))
    guess = n * away + special.ndtri(min(target, 1 - 1e-16)) * sd
    margin = 3 * sd + 10
    low = np.clip(np.floor(guess - margin), -1, n).astype(np.int64)
    high = np.clip(np.ceil(guess + margin), 0, n).astype(np.int64)
    low_holds = (low < 0) | (special.bdtr(np.maximum(low, 0), n, away) < target)
    high_holds = special.bdtr(high, n, away) >= target
    return np.where(low_holds & (low < high), low, -1), np.where(high_holds, high, n)


def below_capacity(
    nodes: int, away: float, need: float, zone_away: float = 0.0
) -> float:
    """P(fewer than `need` of `nodes` are up) when each is away a share `away` on its own and the whole pool
    a share `zone_away`."""
    if away <= 0 and zone_away <= 0 or need <= 0:
        return 0.0
    from scipy import special

    up_needed = math.ceil(need - 1e-9)
    alone = (
        float(special.bdtr(min(up_needed - 1, nodes), nodes, 1 - away))
        if up_needed > 0
        else 0.0
    )
    return float(zone_away + (1 - zone_away) * alone)


def away_share(lam: float, replace_h: float) -> float:
    """Share of time a spot node is gone: up for 1/λ on average, then R to replace (alternating renewal)."""
    return lam * replace_h / (1 + lam * replace_h)


def endpoint_options(
    scenario: Scenario,
    catalog: Catalog,
    offers: pd.DataFrame,
    headroom: float | None = None,
    time_limit_s: float | None = None,
) -> tuple[pd.DataFrame, dict[str, Endpoint], dict[str, str]]:
    """Per serving workload, its options (one row per offer, TP and market), its traffic, and the
    endpoints no option can serve (with the reason). Endpoints alike but for their names share one build;
    past `time_limit_s` seconds with endpoints still to build, `TimeLimitReached` says how far it got."""
    headroom = scenario.defaults.vram_headroom if headroom is None else headroom
    frames, endpoints, infeasible = [], {}, {}
    alike: dict[
        str, tuple
    ] = {}  # endpoints alike but for their names share their options, built once
    serving = [
        (w, w.model_dump_json(exclude={"name", "description"}))
        for w in scenario.workloads
        if w.serving
    ]
    kinds = len({key for _, key in serving})
    started = time.perf_counter()
    for workload, key in serving:
        endpoint = endpoints[workload.name] = endpoint_of(workload)
        if key not in alike:
            spent = time.perf_counter() - started
            if time_limit_s is not None and spent > time_limit_s:
                raise TimeLimitReached(
                    f"building the endpoints' options passed the time limit ({time_limit_s:g} s): {len(alike):,} of "
                    f"{kinds:,} endpoints (alike ones counted once) in {spent:.1f} s; raise --time-limit"
                )
            found, reasons = _options(
                workload,
                catalog,
                offers_for(catalog, workload.allow, workload.forbid, offers),
                endpoint,
                headroom,
            )
            kept = (
                _with_kept(
                    _pruned(pd.DataFrame(found)).reset_index(drop=True), endpoints
                )
                if found
                else None
            )
            alike[key] = (workload.name, kept, reasons)
        first, kept, reasons = alike[key]
        if kept is None:
            infeasible[workload.name] = (
                reasons or "no offer is left by its allow/forbid rules"
            )
            continue
        frames.append(
            kept
            if first == workload.name
            else kept.assign(
                workload=workload.name,
                oid=workload.name + kept["oid"].str[len(first) :],
            )
        )
    if not frames:
        return pd.DataFrame(), endpoints, infeasible
    frame = pd.concat(frames, ignore_index=True).sort_values(
        ["workload", "oid"], kind="stable"
    )
    return frame.reset_index(drop=True), endpoints, infeasible


def _with_kept(frame: pd.DataFrame, endpoints: dict[str, Endpoint]) -> pd.DataFrame:
    """Each spot option's table of pool sizes (`pool_sizes`) and the nodes a pool of each size counts at the
    endpoint's availability (`kept`, `pool_table`); on demand both are empty: every node running counts."""
    sizes, kept = [], []
    for option in frame.itertuples(index=False):
        if option.market != "spot":
            sizes.append([])
            kept.append([])
            continue
        n, k = pool_table(
            int(option.most_nodes),
            option.away,
            endpoints[option.workload].availability,
            option.zone_away,
        )
        sizes.append(n.tolist())
        kept.append(k.tolist())
    return frame.assign(pool_sizes=sizes, kept=kept)


def pool_table(
    most: int, away: float, availability: float, zone_away: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """A spot pool's sizes and the nodes each keeps (`kept_counts`). Up to EXACT_POOL_NODES nodes, every size
    0 .. most. A larger pool lists, in order, the sizes n_i where its absent count a_i = n_i − kept_i steps
    up: a pool of n nodes counts n − a_i with n_i the first listed size at or above n (never more than it
    keeps: the absent count only grows with the pool). To EXACT_POOL_NODES those are the exact steps; above,
    sizes about 1/POOL_SIZE_STEP apart and `most`: a few hundred sizes, however large the pool."""
    if most <= EXACT_POOL_NODES:
        sizes = np.arange(most + 1)
        return sizes, kept_counts(sizes, away, availability, zone_away)
    grid, n = list(range(EXACT_POOL_NODES + 1)), EXACT_POOL_NODES
    while n < most:
        n = min(most, n + max(1, n // POOL_SIZE_STEP))
        grid.append(n)
    sizes = np.array(grid)
    absent = sizes - kept_counts(sizes, away, availability, zone_away)
    last = np.r_[
        absent[1:] > absent[:-1], True
    ]  # the largest size of each run of one absent count
    return sizes[last], (sizes - absent)[last]


def _pruned(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (endpoint, provider, GPU family, market) and bucket: the KEEP_PER_BUCKET cheapest per request
    per second, and the cheapest node that serves the bucket at all."""
    frame = frame.sort_values(["workload", "oid"], kind="stable").reset_index(drop=True)
    rps = np.array(frame["node_rps"].tolist(), dtype=float)
    keep = np.zeros(len(frame), dtype=bool)
    for _, index in frame.groupby(
        ["workload", "provider", "gpu_family", "market"], sort=True
    ).indices.items():
        price = frame["node_usd_h"].to_numpy()[index]
        for bucket in range(rps.shape[1]):
            serves = rps[index, bucket] > 0
            if not serves.any():
                continue
            unit = np.where(
                serves, price / np.where(serves, rps[index, bucket], 1.0), np.inf
            )
            keep[
                index[
                    np.argsort(unit, kind="stable")[
                        : min(KEEP_PER_BUCKET, serves.sum())
                    ]
                ]
            ] = True
            keep[index[np.argmin(np.where(serves, price, np.inf))]] = True
    return frame[keep]


def _options(
    workload: Workload,
    catalog: Catalog,
    offers: pd.DataFrame,
    endpoint: Endpoint,
    headroom: float,
) -> tuple[list[dict], str]:
    rows, reasons = [], set()
    peak = endpoint.rates.max(axis=0)  # per bucket
    capacities: dict[tuple, list | None] = {}
    for offer in offers.itertuples(index=False):
        choices = (
            [workload.tensor_parallel] if workload.tensor_parallel else TENSOR_PARALLEL
        )
        for tp in choices:
            if tp > offer.gpus_per_node or offer.gpus_per_node % tp:
                reasons.add(
                    f"tensor_parallel {tp} does not divide {offer.gpus_per_node} GPUs per node"
                )
                continue
            shape = (
                offer.gpu,
                offer.gpu_vram_gib,
                offer.intra_node,
                offer.intra_node_gbs,
                tp,
            )
            if shape not in capacities:
                capacities[shape] = _capacities(workload, catalog, offer, tp, headroom)
            caps = capacities[shape]
            if caps is None or not any(c.serves for c in caps):
                reasons.update(c.limit for c in caps or () if not c.serves)
                continue
            per_node = offer.gpus_per_node // tp
            node_rps = [
                c.max_requests_per_s * per_node * (1 - workload.headroom) for c in caps
            ]  # bursts kept free
            need = sum(
                p / r for p, r in zip(peak, node_rps) if r > 0
            )  # nodes if it served all it can alone
            for market, price, lam, correlation, wait in _markets(workload, offer):
                down = (
                    workload.restart_overhead + wait
                )  # capacity returns, then the replica starts
                away, zone = (
                    away_share(lam * (1 - correlation), down),
                    away_share(lam * correlation, down),
                )
                if zone > 1 - endpoint.availability:
                    reasons.add(
                        f"spot on {offer.key} is gone for the whole pool {zone:.1%} of the time"
                    )
                    continue
                gran, minimum = _billing(catalog, offer)
                spot_waste = (
                    lam * gran / 2 if market == "spot" else 0.0
                )  # half a granule per preemption
                cap = _node_limit(offer)
                most = _most_nodes(need, away, endpoint.availability, cap, zone)
                rows.append(
                    {
                        "workload": workload.name,
                        "oid": f"{workload.name}/{offer.key}/TP{tp}/{market}",
                        "offer_key": offer.key,
                        "provider": offer.provider,
                        "region": offer.region,
                        "instance_type": offer.instance_type,
                        "gpu": offer.gpu,
                        "gpu_family": catalog.gpus[offer.gpu].family,
                        "gpus_per_node": int(offer.gpus_per_node),
                        "gpu_vram_gib": float(offer.gpu_vram_gib),
                        "intra_node": offer.intra_node,
                        "intra_node_gbs": float(offer.intra_node_gbs),
                        "tp": tp,
                        "replicas_per_node": per_node,
                        "market": market,
                        "price_per_node_h": float(price),
                        "node_usd_h": float(price) * (1 + spot_waste),
                        "lam_spot": lam,
                        "away": away,
                        "zone_away": zone,
                        "correlation": correlation,
                        "capacity_wait_h": wait,
                        "max_nodes": offer.max_nodes,
                        "most_nodes": most,
                        "session_h": [
                            float(
                                billed_hours(
                                    h + workload.restart_overhead, gran, minimum
                                )
                            )
                            for h in endpoint.hours
                        ],
                        "node_rps": node_rps,
                        "limits": [c.limit for c in caps],
                    }
                )
    return rows, "; ".join(sorted(reasons))


def _capacities(workload: Workload, catalog: Catalog, offer, tp: int, headroom: float):
    try:
        caps = replica_capacities(workload, catalog, offer, tp, headroom)
    except (
        ValueError
    ) as exc:  # the physics rules the GPU out (e.g. no fp8 tensor cores)
        return [serving.Capacity(0.0, str(exc), 0)]
    return caps


def _markets(workload: Workload, offer):
    """(market, price, preemptions per node-hour, correlation, capacity wait) of each market the offer has."""
    if not _missing(offer.on_demand_usd_h) and workload.allows_market("on_demand"):
        yield "on_demand", offer.on_demand_usd_h, 0.0, 0.0, 0.0
    if (
        workload.interruption_tolerance != "none"
        and not _missing(offer.spot_usd_h)
        and workload.allows_market("spot")
    ):
        lam = (
            0.0
            if _missing(offer.spot_preemption_per_h)
            else offer.spot_preemption_per_h
        )
        yield (
            "spot",
            offer.spot_usd_h,
            lam,
            float(offer.spot_correlation),
            float(offer.spot_capacity_wait_h),
        )


def _billing(catalog: Catalog, offer) -> tuple[float, float]:
    provider = catalog.providers[offer.provider]
    gran = (
        offer.billing_granularity_h
        if not _missing(offer.billing_granularity_h)
        else provider.billing_granularity_h
    )
    minimum = (
        offer.billing_minimum_h
        if not _missing(offer.billing_minimum_h)
        else provider.billing_minimum_h
    )
    return float(gran), float(minimum)


def _node_limit(offer) -> int | None:
    return None if _missing(offer.max_nodes) else int(offer.max_nodes)


def _most_nodes(
    need: float,
    away: float,
    availability: float,
    cap: int | None,
    zone_away: float = 0.0,
) -> int:
    """Enough nodes of one option to carry the whole peak alone (after its absences), within its cap and
    MOST_POOL_NODES: the smallest pool of want .. 4·want + 16 nodes that keeps `want`, else the largest of
    them. The nodes kept never fall as the pool grows (one more node adds at most one to the absent count),
    so the search weighs every size at once for pools of up to a few hundred nodes, and a few rounds of
    sizes spread over what is left for a million."""
    want = max(1, math.ceil(min(need, MOST_POOL_NODES) - 1e-9))
    low, high = (
        want,
        4 * want + 16,
    )  # the smallest pool that keeps `want` is in low .. high, if any is
    while True:
        count = high - low + 1 if high - low < SEARCH_SIZES else SEARCH_STEP
        sizes = np.unique(np.linspace(low, high, count).round().astype(np.int64))
        enough = np.flatnonzero(
            kept_counts(sizes, away, availability, zone_away) >= want
        )
        if not len(enough):
            most = high  # none keeps `want`: the largest
            break
        first = enough[0]
        if first == 0 or sizes[first] - sizes[first - 1] == 1:
            most = int(sizes[first])
            break
        low, high = int(sizes[first - 1]) + 1, int(sizes[first])
    most = min(most, MOST_POOL_NODES)
    return min(most, cap) if cap is not None else most


SEARCH_SIZES, SEARCH_STEP = 512, 32
"""`_most_nodes` weighs every pool size at once when there are at most SEARCH_SIZES, else SEARCH_STEP sizes
spread over those left at a time."""


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def estimate_tables(
    loaded,
    workload_name: str | None = None,
    gpu_queries: tuple[str, ...] = (),
    top: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """`planner estimate`'s two tables: per workload, GPU and count (`estimate_rows`), and per endpoint, GPU, TP
    and request size (`capacity_rows`); `gpu_queries` as `--gpu` (a name, a family or `NAME:COUNT`), `top` the
    best few of each."""
    from planner.load.catalog import split_accelerator
    from planner.physics.estimate_table import best_rows, estimate_rows

    names = tuple(dict.fromkeys(split_accelerator(q)[0] for q in gpu_queries))
    rows = [
        r
        for r in estimate_rows(
            loaded, workload_name, names
        )  # H100:8: the rows on nodes of 8
        if not gpu_queries
        or any(
            loaded.catalog.accelerator_matches(r["gpu"], r["gpus_per_node"], q)
            for q in gpu_queries
        )
    ]
    capacity = capacity_rows(loaded.scenario, loaded.catalog, workload_name, names)
    if top:
        rows, capacity = best_rows(rows, top), best_rows(capacity, top)
    return rows, capacity


def capacity_rows(
    scenario: Scenario,
    catalog: Catalog,
    workload_name: str | None = None,
    gpu_queries: tuple[str, ...] = (),
) -> list[dict]:
    """`planner estimate` for endpoints: per serving workload, GPU model, TP degree and request size, one
    replica's weights and KV room, the batch that fits, the most requests/s it serves within the SLO, and its
    TTFT (at the SLO's quantile) and mean TPOT at that rate replayed step by step."""
    rows = []
    headroom = scenario.defaults.vram_headroom
    for workload in scenario.workloads:
        if not workload.serving or (workload_name and workload.name != workload_name):
            continue
        offers = offers_for(catalog, workload.allow, workload.forbid).sort_values(
            ["gpu", "gpus_per_node", "key"],
            ascending=[True, False, True],
            kind="stable",
        )
        for gpu_name, on_gpu in offers.groupby("gpu", sort=True):
            if gpu_queries and not any(
                catalog.gpu_matches(gpu_name, q) for q in gpu_queries
            ):
                continue
            offer = next(
                on_gpu.itertuples(index=False)
            )  # the largest node: every TP degree it offers
            for tp in (
                [workload.tensor_parallel]
                if workload.tensor_parallel
                else TENSOR_PARALLEL
            ):
                if tp > offer.gpus_per_node or offer.gpus_per_node % tp:
                    continue
                caps = _capacities(workload, catalog, offer, tp, headroom)
                if caps is None:
                    continue
                replica = replica_of(workload, catalog, offer, tp, headroom)
                for bucket, cap in zip(workload.traffic.buckets, caps):
                    at = cap.at_max
                    replayed = (
                        batching.simulate(
                            replica,
                            bucket.prompt_tokens,
                            bucket.output_tokens,
                            rate=cap.max_requests_per_s,
                        )
                        if cap.serves and cap.limit != "measured"
                        else None
                    )
                    if replayed is not None and replayed.saturated:
                        replayed = None
                    rows.append(
                        {
                            "workload": workload.name,
                            "gpu": gpu_name,
                            "tensor_parallel": tp,
                            "prompt_tokens": bucket.prompt_tokens,
                            "output_tokens": bucket.output_tokens,
                            "max_batch": cap.max_batch,
                            "max_requests_per_s": round(cap.max_requests_per_s, 3),
                            "ttft_ms": round(at.ttft_s * 1e3, 1) if at else None,
                            "tpot_ms": round(at.tpot_s * 1e3, 2) if at else None,
                            "batch_at_max": round(at.batch, 1) if at else None,
                            # the same rate replayed step by step (physics/batching.py): where the two
                            # disagree, the closed form's capacity is off
                            "replayed_ttft_ms": round(
                                replayed.ttft(workload.slo.quantile) * 1e3, 1
                            )
                            if replayed
                            else None,
                            "replayed_tpot_ms": round(replayed.tpot() * 1e3, 2)
                            if replayed
                            else None,
                            "limit": cap.limit if cap.serves else "",
                            "reason": "" if cap.serves else cap.limit,
                        }
                    )
    return rows
