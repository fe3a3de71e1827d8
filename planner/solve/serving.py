"""The endpoints' part of either CP-SAT model (`planner solve`, `planner batch`): nodes of each option per
traffic period, the nodes a spot pool counts, and the slices of each request size routed to each option.

Each constraint family is `add_<rule>(m, limits)` like the models' own and reads only `m.model` and
`m.serving`, so both models walk the same families.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from ortools.sat.python import cp_model

from planner.candidates.endpoints import Endpoint, all_day_usd, period_usd
from planner.candidates.limits import to_cents

LOAD_SCALE = 1_000_000
"""Loads enter CP-SAT as integers: a node's capacity is LOAD_SCALE units, a slice's load is rounded up."""


@dataclass
class ServingVars:
    """Endpoint decisions: nodes of each option per traffic period, how many of them count (spot pools
    lose some to preemption), and how many of each bucket's slices each option serves."""

    options: pd.DataFrame
    traffic: dict[str, Endpoint]
    nodes: dict[
        tuple[int, int], cp_model.IntVar
    ]  # (option row, period) -> nodes running
    base: dict[int, cp_model.IntVar]  # option row -> nodes running all day
    kept: dict[
        tuple[int, int], cp_model.IntVar
    ]  # (option row, period) -> nodes counted at `availability`
    slices: dict[
        tuple[int, int, int], cp_model.IntVar
    ]  # (option row, period, bucket) -> slices routed
    used: dict[
        int, cp_model.BoolVar
    ]  # spot option row -> the endpoint's spot pool is this option
    pools: dict[
        int, cp_model.BoolVar
    ]  # option row -> it runs in some period (endpoints that count pools)

    def option_periods(self):
        """(row, option, its endpoint, period) for every option and traffic period, in order."""
        for row, option in enumerate(self.options.itertuples(index=False)):
            endpoint = self.traffic[option.workload]
            for period in range(len(endpoint.hours)):
                yield row, option, endpoint, period

    @functools.cached_property
    def cost_terms(self) -> list[tuple[str, int, cp_model.IntVar]]:
        """(endpoint, cents, variable): base nodes all day, and per period the nodes above the base (one
        billing session a day each, with a replica's start-up); the objective and budgets share them."""
        terms = []
        for row, option in enumerate(self.options.itertuples(index=False)):
            endpoint = self.traffic[option.workload]
            terms.append(
                (
                    option.workload,
                    to_cents(all_day_usd(option, endpoint)),
                    self.base[row],
                )
            )
            if endpoint.pool_usd_per_h:
                terms.append(
                    (option.workload, to_cents(endpoint.pool_usd), self.pools[row])
                )
            if endpoint.autoscale:
                for period in range(len(endpoint.hours)):
                    extra = to_cents(period_usd(option, endpoint, period))
                    terms.append((option.workload, extra, self.nodes[row, period]))
                    terms.append((option.workload, -extra, self.base[row]))
        return terms

    @property
    def unit_cents(self) -> list[tuple[int, cp_model.IntVar]]:
        return [(c, v) for _, c, v in self.cost_terms]

    @property
    def most_cents(self) -> int:
        """The most the endpoints could cost (every variable at its upper bound, its option's most nodes)."""
        most = {
            var.index: int(self.options["most_nodes"].iat[row])
            for row, var in self.base.items()
        }
        most.update(
            (var.index, int(self.options["most_nodes"].iat[row]))
            for (row, _), var in self.nodes.items()
        )
        most.update((var.index, 1) for var in self.pools.values())
        return sum(max(c, 0) * most[var.index] for _, c, var in self.cost_terms)

    def node_terms(self, mask: np.ndarray, column: str) -> dict[int, list]:
        """Per period, (coefficient, nodes) of the options in `mask`: GPUs (`gpus_per_node`) or nodes (1)."""
        per_period: dict[int, list] = {}
        for row in np.flatnonzero(mask):
            option = self.options.iloc[row]
            coef = int(option["gpus_per_node"]) if column == "gpus" else 1
            for period in range(len(self.traffic[option["workload"]].hours)):
                per_period.setdefault(period, []).append(
                    (coef, self.nodes[row, period])
                )
        return per_period

    def add_hints(self, model: cp_model.CpModel, chosen: pd.DataFrame) -> None:
        """Hint every endpoint variable from a `chosen` frame (of a model over the same options): 0 where
        it has no row."""
        values = (
            {(r.option, r.period): r for r in chosen.itertuples(index=False)}
            if len(chosen)
            else {}
        )
        for (row, period), var in self.nodes.items():
            r = values.get((row, period))
            model.add_hint(var, r.nodes if r else 0)
            model.add_hint(self.kept[row, period], r.kept if r else 0)
        for (row, period, bucket), var in self.slices.items():
            r = values.get((row, period))
            model.add_hint(var, r.slices[bucket] if r else 0)
        base = {r.option: r.base for r in values.values()}
        for row, var in self.base.items():
            model.add_hint(var, base.get(row, 0))
        runs = {o for (o, _), r in values.items() if r.nodes}
        for row, var in self.used.items():
            model.add_hint(var, int(row in runs))
        for row, var in self.pools.items():
            if row not in self.used:
                model.add_hint(var, int(row in runs))

    def chosen(self, value) -> pd.DataFrame:
        """One row per (option, period) with nodes or load: nodes, nodes counted, slices per bucket, and
        the period's share of the option's cost in dollars (`value` reads a variable of the solution), its
        operating cost as a pool (`operating_usd`) among them, shared by its periods in proportion to their time."""
        rows = []
        for row, option in enumerate(self.options.itertuples(index=False)):
            endpoint = self.traffic[option.workload]
            base = value(self.base[row])
            mine = len(rows)
            for period in range(len(endpoint.hours)):
                nodes = value(self.nodes[row, period])
                slices = [
                    value(self.slices[row, period, b])
                    if (row, period, b) in self.slices
                    else 0
                    for b in range(endpoint.rates.shape[1])
                ]
                if not nodes and not any(slices):
                    continue
                cost = (
                    base * all_day_usd(option, endpoint) * endpoint.time_share[period]
                )
                if endpoint.autoscale:
                    cost += (nodes - base) * period_usd(option, endpoint, period)
                rows.append(
                    {
                        "workload": option.workload,
                        "oid": option.oid,
                        "option": row,
                        "period": period,
                        "nodes": nodes,
                        "kept": value(self.kept[row, period]),
                        "base": base,
                        "slices": slices,
                        "cost_usd": cost,
                        "operating_usd": 0.0,
                    }
                )
            if row in self.pools and value(self.pools[row]) and endpoint.pool_usd_per_h:
                shares = [endpoint.time_share[r["period"]] for r in rows[mine:]]
                for r, share in zip(rows[mine:], shares):
                    r["operating_usd"] = endpoint.pool_usd * share / sum(shares)
                    r["cost_usd"] += r["operating_usd"]
        # the columns even when nothing runs (no traffic at all)
        return pd.DataFrame(rows, columns=CHOSEN_COLUMNS)


CHOSEN_COLUMNS = [
    "workload",
    "oid",
    "option",
    "period",
    "nodes",
    "kept",
    "base",
    "slices",
    "cost_usd",
    "operating_usd",
]


def add_endpoint_routing(m, limits) -> None:
    """Each bucket's requests, in each period, are routed whole: its `slices` parts go to options that serve
    that size (Mélange's slice assignment).

    Σ_o slices[o, p, b] = S for every endpoint, period p and bucket b.
    """
    if m.serving is None:
        return
    sv = m.serving
    for name, endpoint in sorted(sv.traffic.items()):
        rows = np.flatnonzero((sv.options["workload"] == name).to_numpy())
        for period in range(len(endpoint.hours)):
            for bucket in range(endpoint.rates.shape[1]):
                if endpoint.rates[period, bucket] <= 0:
                    continue
                parts = [
                    sv.slices[r, period, bucket]
                    for r in rows
                    if (r, period, bucket) in sv.slices
                ]
                m.model.add(sum(parts) == endpoint.slices).with_name(
                    f"route[{name}@{period}/{bucket}]"
                )


def add_endpoint_capacity(m, limits) -> None:
    """The nodes an option counts carry the load routed to it: a slice of bucket b is rate/S requests/s, and
    a node serves node_rps[b] of them within the SLO.

    Σ_b ceil(L·rate[p, b] / (S·node_rps[o, b])) · slices[o, p, b] ≤ L · kept[o, p], with L = LOAD_SCALE.
    """
    if m.serving is None:
        return
    sv = m.serving
    for row, option, endpoint, period in sv.option_periods():
        terms = [
            (
                slice_load(endpoint, period, bucket, option.node_rps[bucket]),
                sv.slices[row, period, bucket],
            )
            for bucket in range(endpoint.rates.shape[1])
            if (row, period, bucket) in sv.slices
        ]
        if terms:
            m.model.add(
                sum(c * v for c, v in terms) <= LOAD_SCALE * sv.kept[row, period]
            ).with_name(f"capacity[{option.oid}@{period}]")


def slice_load(endpoint: Endpoint, period: int, bucket: int, node_rps: float) -> int:
    """One slice's load on one node of an option, in LOAD_SCALE units, rounded up (never optimistic)."""
    return math.ceil(
        LOAD_SCALE * endpoint.rates[period, bucket] / (endpoint.slices * node_rps)
        - 1e-6
    )


def floor_usd(options: pd.DataFrame, traffic: dict[str, Endpoint]) -> float:
    """A lower bound on what the endpoints cost on these options (their part of the objective), in closed form:
    every bucket's slices routed whole, each on the option where its load (`slice_load`) costs least, at a
    node's least cost in that period: with autoscale the lesser of its own session (`period_usd`) and its share of
    a node on all day (`all_day_usd` spread over the periods as their sessions are), without it that share alone
    (a node on in one period is on in all). The schedule's base nodes, spot pools keeping fewer nodes than run,
    whole nodes and pool fees only add to it. inf where a bucket with traffic has no option to serve it."""
    total = 0.0
    for name, endpoint in traffic.items():
        least = np.full(
            endpoint.rates.shape, math.inf
        )  # per (period, bucket): one slice's least cost
        for option in options[options["workload"] == name].itertuples(index=False):
            sessions = np.array(
                [period_usd(option, endpoint, p) for p in range(len(endpoint.hours))]
            )
            spread = (
                all_day_usd(option, endpoint) * sessions / max(sessions.sum(), 1e-300)
            )
            node = np.minimum(sessions, spread) if endpoint.autoscale else spread
            for (period, bucket), rate in np.ndenumerate(endpoint.rates):
                rps = option.node_rps[bucket]
                if rate > 0 and rps > 0:
                    load = slice_load(endpoint, period, bucket, rps) / LOAD_SCALE
                    least[period, bucket] = min(
                        least[period, bucket], node[period] * load
                    )
        total += endpoint.slices * float(least[endpoint.rates > 0].sum())
    return total


def add_spot_pool(m, limits) -> None:
    """Spot nodes count only as many as the pool keeps at the endpoint's availability (binomial quantile of
    the nodes away), and an endpoint has at most one spot pool, so that quantile is the whole endpoint's.

    kept[o, p] = nodes[o, p] on demand; kept[o, p] = K_o(nodes[o, p]) on spot; Σ_{spot o} used_o ≤ 1,
    nodes[o, p] ≤ most_o · used_o. K_o is the option's table (`pool_table`): `kept` at every size up to its
    largest pool, an element constraint; for a pool of more than EXACT_POOL_NODES, `kept` at the sizes n_i
    where its absent count a_i steps up, and kept = max(0, nodes − Σ_i (a_i − a_{i−1})·[nodes > n_{i−1}]):
    a literal per step, so the model does not grow with the pool.
    """
    if m.serving is None:
        return
    sv = m.serving
    for name in sorted(sv.traffic):
        pools = [r for r in sv.used if sv.options["workload"].iat[r] == name]
        if pools:
            m.model.add(sum(sv.used[r] for r in pools) <= 1).with_name(
                f"one_spot_pool[{name}]"
            )
    for row, option in enumerate(sv.options.itertuples(index=False)):
        for period in range(len(sv.traffic[option.workload].hours)):
            nodes, kept = sv.nodes[row, period], sv.kept[row, period]
            if option.market == "spot":
                if (
                    len(option.pool_sizes) == option.most_nodes + 1
                ):  # every size: the table is indexed by it
                    m.model.add_element(nodes, list(option.kept), kept)
                else:
                    _add_absent_steps(
                        m.model,
                        nodes,
                        kept,
                        option.pool_sizes,
                        option.kept,
                        f"{option.oid}@{period}",
                    )
                m.model.add(nodes <= option.most_nodes * sv.used[row]).with_name(
                    f"pool[{option.oid}@{period}]"
                )
            else:
                m.model.add(kept == nodes)


def _add_absent_steps(
    model: cp_model.CpModel, nodes, kept, sizes, kept_at, name: str
) -> None:
    """kept = max(0, nodes − a_i) for nodes in (n_{i−1}, n_i]: one literal per size where the absent count
    a_i = n_i − kept_i steps up, true when the pool is larger than the size before it."""
    steps, before, absent_before, never_below = [], 0, 0, True
    for size, k in zip(sizes, kept_at):
        absent = int(size) - int(k)
        if absent > absent_before:
            larger = model.new_bool_var(f"pool_above[{name}/{before}]")
            model.add(nodes >= before + 1).only_enforce_if(larger)
            model.add(nodes <= before).only_enforce_if(larger.Not())
            steps.append((absent - absent_before, larger))
            absent_before = absent
            # the smallest pool of the step counts at least none
            never_below &= before + 1 >= absent
        before = int(size)
    if never_below:
        model.add(kept == nodes - sum(c * v for c, v in steps))
    else:
        model.add_max_equality(kept, [nodes - sum(c * v for c, v in steps), 0])


def counts_pools(endpoint: Endpoint, options: pd.DataFrame) -> bool:
    """Whether the model needs to know which options an endpoint runs on: it prices pools, or has more
    options or providers than it may use (`options`: its own)."""
    return (
        bool(endpoint.pool_usd_per_h)
        or len(options) > endpoint.max_pools
        or options["provider"].nunique() > endpoint.max_providers
    )


def add_endpoint_pools(m, limits) -> None:
    """An option runs in some period only if it is one of the endpoint's pools (a spot option's `used`
    is its pool flag already, `add_spot_pool`).

    nodes[o, p] <= most_o · pool_o for every period p.
    """
    if m.serving is None:
        return
    sv = m.serving
    for row, var in sorted(sv.pools.items()):
        if row in sv.used:
            continue
        most = int(sv.options["most_nodes"].iat[row])
        for period in range(len(sv.traffic[sv.options["workload"].iat[row]].hours)):
            m.model.add(sv.nodes[row, period] <= most * var)


def add_endpoint_spread(m, limits) -> None:
    """An endpoint runs on at most `max_pools` options (an offer, market and layout each) and `max_providers`
    providers over all its periods: a plan one team can operate. Added only where the endpoint has more options
    or providers than that.

    Σ_o pool_o <= max_pools; pool_o <= provider_P(o); Σ_P provider_P <= max_providers.
    """
    if m.serving is None:
        return
    sv = m.serving
    for name, endpoint in sorted(sv.traffic.items()):
        rows = np.flatnonzero((sv.options["workload"] == name).to_numpy())
        providers = sorted(set(sv.options["provider"].iloc[rows]))
        if len(rows) > endpoint.max_pools:
            m.model.add(sum(sv.pools[r] for r in rows) <= endpoint.max_pools).with_name(
                f"max_pools[{name}]"
            )
        if len(providers) > endpoint.max_providers:
            chosen = {
                p: m.model.new_bool_var(f"provider[{name}/{p}]") for p in providers
            }
            for row in rows:
                m.model.add_implication(
                    sv.pools[row], chosen[sv.options["provider"].iat[row]]
                )
            m.model.add(sum(chosen.values()) <= endpoint.max_providers).with_name(
                f"max_providers[{name}]"
            )


def add_endpoint_schedule(m, limits) -> None:
    """Without `autoscale` the same nodes run all day; with it, each period may add nodes above the base.

    nodes[o, p] = base_o for all p (fixed); base_o ≤ nodes[o, p] (autoscale).
    """
    if m.serving is None:
        return
    sv = m.serving
    for row, _, endpoint, period in sv.option_periods():
        if endpoint.autoscale:
            m.model.add(sv.base[row] <= sv.nodes[row, period])
        else:
            m.model.add(sv.base[row] == sv.nodes[row, period])


def serving_variables(
    model: cp_model.CpModel, options: pd.DataFrame, traffic: dict[str, Endpoint]
) -> ServingVars:
    """The endpoints' decision variables (bounded by what each option could ever need)."""
    nodes, base, kept, slices, used, pools = {}, {}, {}, {}, {}, {}
    counted = {
        name
        for name, endpoint in traffic.items()
        if counts_pools(endpoint, options[options["workload"] == name])
    }
    for row, option in enumerate(options.itertuples(index=False)):
        endpoint = traffic[option.workload]
        most = int(option.most_nodes)
        base[row] = model.new_int_var(0, most, f"base[{option.oid}]")
        if option.market == "spot":
            used[row] = model.new_bool_var(f"spot_pool[{option.oid}]")
        if option.workload in counted:
            pools[row] = (
                used[row] if row in used else model.new_bool_var(f"pool[{option.oid}]")
            )
        for period in range(len(endpoint.hours)):
            nodes[row, period] = model.new_int_var(
                0, most, f"nodes[{option.oid}@{period}]"
            )
            kept[row, period] = model.new_int_var(
                0, most, f"kept[{option.oid}@{period}]"
            )
            for bucket, rps in enumerate(option.node_rps):
                if rps > 0 and endpoint.rates[period, bucket] > 0:
                    slices[row, period, bucket] = model.new_int_var(
                        0, endpoint.slices, f"slices[{option.oid}@{period}/{bucket}]"
                    )
    return ServingVars(
        options.reset_index(drop=True), traffic, nodes, base, kept, slices, used, pools
    )


def serving_ties(sv: ServingVars) -> list[tuple[int, cp_model.IntVar, int]]:
    """The endpoints' tie-break among plans of equal cost: nodes and slices on options earlier in (price,
    name) order first. (rank, variable, its upper bound)."""
    order = sv.options.sort_values(["workload", "node_usd_h", "oid"], kind="stable")
    rank = {row: r + 1 for r, row in enumerate(order.index)}
    ties = [
        (rank[row], var, int(sv.options["most_nodes"].iat[row]))
        for (row, _), var in sorted(sv.nodes.items())
    ]
    ties += [
        (rank[row], var, sv.traffic[sv.options["workload"].iat[row]].slices)
        for (row, _, _), var in sorted(sv.slices.items())
    ]
    return ties


SERVING_FAMILIES = (
    add_endpoint_routing,
    add_endpoint_capacity,
    add_spot_pool,
    add_endpoint_pools,
    add_endpoint_spread,
    add_endpoint_schedule,
)
