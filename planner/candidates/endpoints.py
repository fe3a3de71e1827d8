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

How many of a spot pool's nodes count at an availability, and the table of pool sizes the model
indexes, are in pool_availability.py; `planner estimate`'s table of endpoints is in estimate_tables.py.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.candidates.pool_availability import (
    away_share,
    most_nodes,
    pool_table,
)
from planner.economics.candidate import billed_hours
from planner.errors import TimeLimitReached
from planner.load.catalog import Catalog, offers_for
from planner.physics import serving
from planner.physics.hardware_shape import gpu_perf, model_shape, resolve_model
from planner.schema.purchase import Reserved
from planner.schema.scenario import Scenario
from planner.schema.workload import Workload

TENSOR_PARALLEL = (1, 2, 4, 8)
KEEP_PER_BUCKET = 2
"""Options kept per (endpoint, provider, GPU family, market) and request size: the few cheapest per request
served, and the cheapest node (small nodes fit low rates). Quotas count per provider or GPU family, so
each keeps its own best; the rest cost more for the same capacity under the same limits (a node limit
of one region can still send replicas to the next best)."""


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
    # what each pool it runs on costs to operate, per hour of its duration
    pool_usd_per_h: float = 0.0

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
    commitments: dict[str, list[Reserved]] = {}
    for option in getattr(scenario, "purchase_options", ()):
        if isinstance(option, Reserved):
            commitments.setdefault(option.offer, []).append(option)
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
                commitments,
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
    commitments: dict[str, list[Reserved]],
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
                capacities[shape] = capacities_or_reason(
                    workload, catalog, offer, tp, headroom
                )
            caps = capacities[shape]
            if caps is None or not any(c.serves for c in caps):
                reasons.update(c.limit for c in caps or () if not c.serves)
                continue
            per_node = offer.gpus_per_node // tp
            node_rps = [
                c.max_requests_per_s * per_node * (1 - workload.headroom) for c in caps
            ]  # bursts kept free
            # nodes if it served all it can alone
            need = sum(p / r for p, r in zip(peak, node_rps) if r > 0)
            for market, price, lam, correlation, wait, bought in _markets(
                workload, offer, commitments.get(offer.key, ())
            ):
                # capacity returns, then the replica starts
                down = workload.restart_overhead + wait
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
                # half a granule per preemption
                spot_waste = lam * gran / 2 if market == "spot" else 0.0
                cap = _node_limit(offer)
                sessions = [
                    float(billed_hours(h + workload.restart_overhead, gran, minimum))
                    for h in endpoint.hours
                ]
                key, oid = offer.key, f"{workload.name}/{offer.key}/TP{tp}/{market}"
                node_usd_h = float(price) * (1 + spot_waste)
                if (
                    bought is not None
                ):  # paid all day for whole terms, however few hours it serves
                    key, oid = f"{offer.key}@{bought.label}", f"{oid}@{bought.label}"
                    hours = 24.0 * endpoint.days
                    node_usd_h *= (
                        math.ceil(hours / bought.term - 1e-9) * bought.term / hours
                    )
                    sessions = [24.0 / share for share in endpoint.day_share]
                    stated = [c for c in (cap, bought.max_nodes) if c is not None]
                    cap = min(stated) if stated else None
                most = most_nodes(need, away, endpoint.availability, cap, zone)
                rows.append(
                    {
                        "workload": workload.name,
                        "oid": oid,
                        "offer_key": key,
                        "purchase": "" if bought is None else bought.label,
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
                        "node_usd_h": node_usd_h,
                        "spot_rate_per_node_h": lam,
                        "away": away,
                        "zone_away": zone,
                        "correlation": correlation,
                        "capacity_wait_h": wait,
                        "max_nodes": offer.max_nodes if cap is None else cap,
                        "most_nodes": most,
                        "session_h": sessions,
                        "node_rps": node_rps,
                        "limits": [c.limit for c in caps],
                    }
                )
    return rows, "; ".join(sorted(reasons))


def capacities_or_reason(
    workload: Workload, catalog: Catalog, offer, tp: int, headroom: float
):
    try:
        caps = replica_capacities(workload, catalog, offer, tp, headroom)
    except (
        ValueError
    ) as exc:  # the physics rules the GPU out (e.g. no fp8 tensor cores)
        return [serving.Capacity(0.0, str(exc), 0)]
    return caps


def _markets(workload: Workload, offer, commitments=()):
    """(market, price, preemptions per node-hour, correlation, capacity wait, commitment or None) of each market
    the offer has, and of each commitment (`reserved` purchase option) on it."""
    if not _missing(offer.on_demand_usd_h) and workload.allows_market("on_demand"):
        yield "on_demand", offer.on_demand_usd_h, 0.0, 0.0, 0.0, None
    if workload.allows_market("reserved"):
        for option in commitments:
            yield "reserved", option.rate_per_node_h, 0.0, 0.0, 0.0, option
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
            None,
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


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
