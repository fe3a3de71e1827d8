"""Expansion, the first stage of candidate generation: each workload's (offer, market, node count) rows.

Every (offer, market) row of an offers table is built once (`all_markets`) and shared by the workloads, which pick
and repeat it once per node count they could run on, with the storage and egress the workload adds; the rows carry
the group numbers (twins, timing keys, signatures, shapes) later stages work on, and no price, which each call maps
in (`row_prices`).
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.candidates.cache import CandidateCache
from planner.candidates.limits import Limits, limit_keys
from planner.economics.candidate import events_per_loss
from planner.load.catalog import Catalog, offer_mask
from planner.physics.hardware_shape import Shape, checkpoint_size_gib
from planner.physics.storage import (
    StorageNeeds,
    distinct_rows,
    first_rows,
    needs_of,
    numbered,
    storage_columns,
    storage_work_h,
)
from planner.schema.workload import Workload

INTER_REGION_USD_PER_GIB = 0.02
"""Moving data between regions of one provider (AWS/GCP list ~0.01-0.02 USD/GB); a stated default."""
NODE_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
"""Node counts considered between a workload's bounds (plus the bounds): dense where it matters."""


def _node_counts(
    low_gpus: int, high_gpus: int, g: int, multi_node: bool, cap: float
) -> list[int]:
    low, high = max(1, math.ceil(low_gpus / g)), high_gpus // g
    if not multi_node:
        high = min(high, 1)
    high = int(min(high, cap))
    if high < low:
        return []
    return sorted({low, high} | {n for n in NODE_LADDER if low <= n <= high})


_MARKETS = ("on_demand", "spot", "spot_fallback")


@dataclass
class _Markets:
    """Every (offer, market) row of one offers table under one scenario's limits, with what no workload changes
    (billing, GPU family, the quotas covering it, its node cap), market by market (`_MARKETS`) and offer by offer
    within each: built once and shared by every workload's rows, which pick and repeat them (`_build_rows`)."""

    columns: dict[str, np.ndarray]  # `_OFFER_ROW`: the offer's position
    ladder: np.ndarray  # per row: its number in `ladders`
    ladders: list[
        tuple[int, bool, float]
    ]  # (GPUs per node, multi-node, node cap): what its node counts depend on
    codes: dict = field(default_factory=dict)  # (column, sorted) -> `code`
    numbers: dict = field(default_factory=dict)  # columns -> `number`

    def code(self, column: str, sort: bool = False) -> np.ndarray:
        """The column's values numbered (NaN too), in order of first appearance or, `sort`, of value."""
        if (column, sort) not in self.codes:
            self.codes[column, sort] = pd.factorize(
                self.columns[column], sort=sort, use_na_sentinel=False
            )[0]
        return self.codes[column, sort]

    def number(self, names: tuple[str, ...]) -> np.ndarray:
        """The rows numbered by their values in `names` (`numbered`), kept: what every workload's rows repeat."""
        if names not in self.numbers:
            start = np.zeros(len(self.ladder), dtype=np.int64)
            self.numbers[names] = numbered(start, (self.code(n) for n in names))
        return self.numbers[names]


def all_markets(offers: pd.DataFrame, catalog: Catalog, limits: Limits) -> _Markets:
    """`_Markets` of `offers`: on-demand where it has an on-demand price, spot where a spot price, and
    spot_fallback (§10) where both."""
    offers = offers.assign(**{_OFFER_ROW: np.arange(len(offers))})
    on_demand = offers[offers["on_demand_usd_h"].notna()]
    spot = offers[offers["spot_usd_h"].notna()].assign(
        market="spot",
        correlation=lambda o: o["spot_correlation"],
        wait_h=lambda o: o["spot_capacity_wait_h"],
        wait_cv=lambda o: o["spot_capacity_wait_cv"],
    )
    markets = pd.concat(
        [
            on_demand.assign(
                market="on_demand", correlation=0.0, wait_h=0.0, wait_cv=1.0
            ),
            spot,
            spot[spot["on_demand_usd_h"].notna()].assign(market="spot_fallback"),
        ],
        ignore_index=True,
    )
    markets["fallback"] = markets["market"] == "spot_fallback"
    providers = catalog.providers
    # billing: the offer's own rule where its catalog row gives one (hourly GPU clouds, committed
    # contracts), else the provider's (cost-model §5)
    markets["granularity_h"] = (
        markets["billing_granularity_h"]
        .astype(float)
        .fillna(
            markets["provider"].map(
                {p: v.billing_granularity_h for p, v in providers.items()}
            )
        )
    )
    markets["minimum_h"] = (
        markets["billing_minimum_h"]
        .astype(float)
        .fillna(
            markets["provider"].map(
                {p: v.billing_minimum_h for p, v in providers.items()}
            )
        )
    )
    markets["gpu_family"] = markets["gpu"].map(
        {name: gpu.family for name, gpu in catalog.gpus.items()}
    )
    markets["provider_region"] = markets["provider"] + "/" + markets["region"]
    markets["quota_keys"], markets["capped_offer"], limited = limit_keys(
        markets.assign(gpus=1), limits, "key"
    )
    markets["limited"] = np.array(limited, dtype=bool)  # 1 GPU: limited or not
    caps = np.minimum(
        markets["max_nodes"].astype(float).fillna(math.inf),
        markets["key"].map(limits.node_limits).astype(float).fillna(math.inf),
    )
    combos = pd.DataFrame(
        {
            "g": markets["gpus_per_node"].astype(int),
            "multi": markets["inter_node"] != "none",
            "cap": caps,
        }
    )
    return _Markets(
        {c: markets[c].to_numpy() for c in markets.columns if c in _BASE_COLUMNS},
        combos.groupby(list(combos.columns), sort=False).ngroup().to_numpy(),
        list(combos.drop_duplicates().itertuples(index=False, name=None)),
    )


STORAGE_TIMING = ("checkpoint_h", "restart_h", "read_h", "load_h")
"""A row's storage columns the cost model reads at price 1 (`physics/storage.storage_columns`)."""
STORAGE_COLUMNS = STORAGE_TIMING + (
    "storage",
    "storage_class",
    "persistent",
    "restore_h",
    "stage_h",
    "read_gbs",
    "write_gbs",
    "provisioned_gib",
)
"""A row's storage option and what it gives the workload, besides its price per hour."""
_PER_NODE_COUNT = ("nodes", "gpus", "units") + STORAGE_COLUMNS + ("storage_h",)
"""The expanded rows' columns that differ between the node counts or storage options of one (offer, market)."""
_PER_WORKLOAD = _PER_NODE_COUNT + ("egress",)
"""The expanded rows' columns that are not the (offer, market) row's: its node count's, and the workload's."""


SHAPE_COLUMNS = [
    "gpu",
    "gpus_per_node",
    "nodes",
    "gpu_vram_gib",
    "intra_node",
    "intra_node_gbs",
    "inter_node",
    "inter_node_gbps",
]
TIMING_COLUMNS = SHAPE_COLUMNS + [
    *STORAGE_TIMING,
    "spot_rate_per_node_h",
    "wait_h",
    "wait_cv",
    "granularity_h",
    "minimum_h",
    "fallback",
]


def storage_needs(workload: Workload, catalog: Catalog) -> StorageNeeds:
    """What the workload asks of whatever storage it runs on."""
    return needs_of(workload, checkpoint_size_gib(workload, catalog))


def storage_mask(catalog: Catalog, allow, forbid) -> np.ndarray:
    """Which storage options (`Catalog.storage`) a placement rule allows: by name or by class."""
    table = catalog.storage_table
    names = table["name"].to_numpy()
    classes = table["storage_class"].to_numpy()

    def named(wanted) -> np.ndarray:
        return np.isin(names, wanted) | np.isin(classes, wanted)

    mask = named(allow.storage) if allow.storage else np.ones(len(table), dtype=bool)
    return mask & ~named(forbid.storage) if forbid.storage else mask


def _egress_usd(
    workload: Workload, catalog: Catalog, providers: np.ndarray, regions: np.ndarray
) -> np.ndarray:
    """Moving the data set from where it lives to each candidate (charged by the source provider)."""
    if not workload.data.location or workload.data.size == 0:
        return np.zeros(len(providers))
    home, _, home_region = workload.data.location.partition("/")
    elsewhere = np.asarray(providers != home, dtype=bool)
    other_region = (
        np.asarray((providers == home) & (regions != home_region), dtype=bool)
        if home_region
        else False
    )
    return np.where(
        elsewhere,
        workload.data.size * catalog.providers[home].egress_usd_per_gib,
        np.where(other_region, workload.data.size * INTER_REGION_USD_PER_GIB, 0.0),
    )


def _signature_columns(workload: Workload, limits: Limits) -> list[str]:
    """What a candidate draws on besides cost and GPUs: which quotas cover it, which offer node
    limit, and (for grouped workloads) its provider or region. Candidates with different
    signatures can never stand in for each other, so dominance is checked within one."""
    columns = ["quota_keys", "capped_offer"]
    if any(workload.name in g for g in limits.same_provider):
        columns.append("provider")
    if any(workload.name in g for g in limits.same_region):
        columns.append("provider_region")
    return columns


_TWIN_COLUMNS = SHAPE_COLUMNS + [
    "market",
    "spot_rate_per_node_h",
    "wait_h",
    "wait_cv",
    "granularity_h",
    "minimum_h",
    "storage",
    *STORAGE_TIMING,
    "storage_h",
    "egress",
    "units",
]


_OFFER_ROW = "_offer_row"
ROW_COLUMNS = SHAPE_COLUMNS + [
    *STORAGE_COLUMNS,
    "granularity_h",
    "minimum_h",
    "storage_h",
    "egress",
    "key",
    "market",
    "provider",
    "region",
    "instance_type",
    "gpu_family",
    "gpus",
    "max_nodes",
    "wait_h",
    "wait_cv",
    "correlation",
    "fallback",
]
"""What `exact_of` and `candidate_row` read of a row, besides the point's price, λ and physics."""
Row = namedtuple(
    "Row",
    ROW_COLUMNS
    + [
        "price",
        "spot_rate_per_node_h",
        "work_h",
        "item_h",
        "fallback_price",
        "compute_h",
    ],
)
_BASE_COLUMNS = set(
    ROW_COLUMNS
    + TIMING_COLUMNS
    + _TWIN_COLUMNS
    + ["quota_keys", "capped_offer", "provider_region", "limited", _OFFER_ROW]
) - {"spot_rate_per_node_h", *_PER_WORKLOAD}
"""The columns `_Markets` keeps of every (offer, market) row: no prices or λ, which each call maps in (`row_prices`)."""


@dataclass
class Rows:
    """One workload's expanded rows and what is derived from them without prices."""

    catalog: Catalog
    reason: str  # why there are none ('' when there are)
    considered: int
    # ROW_COLUMNS as arrays (strings as Python objects)
    columns: dict = field(default_factory=dict)
    # the offer's position in the offers table (None: no rows)
    offer_row: np.ndarray | None = None
    spot: np.ndarray | None = None  # priced at spot: spot and spot_fallback rows
    # spot_fallback rows, which also carry the on-demand price
    fallback: np.ndarray | None = None
    twin: np.ndarray | None = None  # twin group, before splitting by λ
    timing: np.ndarray | None = None  # timing key without λ
    signature: np.ndarray | None = None
    units: np.ndarray | None = None
    # (instance type, market) number: what runner-ups differ in (`Kinds`)
    kind: np.ndarray | None = None
    # spot events that touch the job per node loss (§3)
    events_per_loss: np.ndarray | None = None
    key_rank: np.ndarray | None = None
    market_rank: np.ndarray | None = None
    shape: np.ndarray | None = None  # row -> its hardware shape's number
    shapes: list[Shape] = field(default_factory=list)  # by number
    # a group ties the workload to one provider or region (its signature names them): `dominated`
    grouped: bool = False
    # digest of λ and fallback prices -> `_twin_groups`
    twins: dict = field(default_factory=dict)
    physics: dict = field(default_factory=dict)  # `Physics.key` -> Physics
    # λ digest -> {(physics, cost settings, hw_rate) -> _Screen}
    screens: dict = field(default_factory=dict)

    @property
    def size(self) -> int:
        return 0 if self.offer_row is None else len(self.offer_row)

    def work_h(self, compute_h: np.ndarray, at=slice(None)) -> np.ndarray:
        """W of the rows `at` from their shapes' `compute_h`: no faster than their storage reads the data, plus
        filling it once (`storage_work_h`)."""
        return storage_work_h(
            compute_h, self.columns["read_h"][at], self.columns["load_h"][at]
        )


_EXPANSION_FIELDS = {"allow", "forbid", "gpus", "data"}
"""The Workload fields `_build_rows` reads, besides its market rule and its storage needs (`storage_needs`)."""


def expanded_rows(
    workload: Workload,
    catalog: Catalog,
    offers: pd.DataFrame,
    limits: Limits,
    token: str | None,
    cache: CandidateCache,
) -> Rows:
    """The workload's price-independent rows, kept per `offers_token` (built afresh without one) and shared
    by every workload with the same expansion inputs: offers allowed, GPU range, markets, storage, data,
    placement groups."""
    if token is None:
        return _build_rows(
            workload, catalog, offers, all_markets(offers, catalog, limits), limits
        )
    scope = (token, repr(limits))
    every = cache.markets.get(scope)
    if every is None:
        every = cache.keep(cache.markets, scope, all_markets(offers, catalog, limits))
    key = (
        *scope,
        grouped(workload, limits),
        workload.model_dump_json(include=_EXPANSION_FIELDS),
        workload.interruption_tolerance == "none",
        bool(workload.time_budget),
        storage_needs(workload, catalog),
    )
    if key not in cache.rows:
        if sum(r.size for r in cache.rows.values()) >= cache.max_rows:
            cache.rows.clear()
        cache.rows[key] = _build_rows(workload, catalog, offers, every, limits)
    return cache.rows[key]


def grouped(workload: Workload, limits: Limits) -> tuple[bool, bool]:
    """Whether the workload is in a same-provider and a same-region group (its signature columns)."""
    return (
        any(workload.name in g for g in limits.same_provider),
        any(workload.name in g for g in limits.same_region),
    )


def _storage_options(
    workload: Workload,
    catalog: Catalog,
    offer: np.ndarray,
    provider: np.ndarray,
    instance_type: np.ndarray,
    nodes: np.ndarray,
    gpus_per_node: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The storage options each (offer, market, node count) row is repeated for, how many per row, and each
    repeated row's storage columns (`storage_columns`, the local disk serving repeated epochs where the data set
    fits on it), worked out once per (provider, node count, node size, local disk): the options of its provider
    the workload allows that no other beats. An option is beaten for a row when another is no
    dearer per hour and no slower to checkpoint, restart, read or fill, one of them strictly: the cost model's
    every figure rises with these, and no constraint of the plan reads storage, so the beaten one could never
    be chosen. Ties keep the first by name."""
    table = catalog.storage_table
    allowed = storage_mask(catalog, workload.allow, workload.forbid)
    needs = storage_needs(workload, catalog)
    # per row (`offer`: its offer's number): its offer's local disk, provider and local disk read rate
    row_offer, first = distinct_rows(offer)
    local = np.array(
        [
            catalog.local_gib.get(key, 0.0)
            for key in zip(provider[first], instance_type[first])
        ]
    )[row_offer]
    # a data set goes on local disks only where they are known to hold it
    fits = (needs.data_gib == 0) | (local >= needs.data_gib)
    is_local = table["storage_class"] == "local"
    local_read = dict(zip(table["provider"][is_local], table["read_mbs"][is_local]))
    read = np.array([local_read.get(p, math.nan) for p in provider[first]], dtype=float)
    # what a node's local disk serves of repeated epochs: where the data set fits on it
    cache = np.where(
        fits & (needs.data_gib > 0), np.where(np.isnan(read), 0.0, read)[row_offer], 0.0
    )
    # the provider's number: its first offer's
    provider_of = pd.factorize(provider[first])[0][row_offer]
    # combos numbered in order of first appearance
    combo_of_row, first = distinct_rows(provider_of, nodes, gpus_per_node, cache)
    combos = (provider[first], nodes[first], gpus_per_node[first], cache[first])
    names = table["name"].to_numpy()
    by_name = np.argsort(names, kind="stable")
    providers, local_class = table["provider"].to_numpy(), is_local.to_numpy()
    # per (provider, whether the data set fits on local disks): its allowed options, by name
    groups: dict[tuple, int] = {}
    options_of: list[np.ndarray] = []
    group = np.zeros(len(first), dtype=np.int64)
    for number, (p, cached) in enumerate(zip(combos[0], combos[3])):
        fit = bool(needs.data_gib == 0 or cached > 0)
        if (p, fit) not in groups:
            groups[p, fit] = len(options_of)
            usable = allowed & (providers == p) & (fit | ~local_class)
            options_of.append(by_name[usable[by_name]])
        group[number] = groups[p, fit]
    # every combo against its group's options, group by group, in one call: each (combo, option) pair once
    blocks = [
        (mine, members)
        for g, mine in enumerate(options_of)
        if len(mine) and len(members := np.flatnonzero(group == g))
    ]
    if not blocks:
        return np.zeros(0, dtype=np.int64), np.zeros(len(nodes), dtype=np.int64), {}
    combo_of_pair = np.concatenate(
        [np.repeat(members, len(mine)) for mine, members in blocks]
    )
    option_of_pair = np.concatenate(
        [np.tile(mine, len(members)) for mine, members in blocks]
    )
    figures = storage_columns(
        needs,
        catalog.storage_arrays,
        option_of_pair,
        *(c[combo_of_pair].astype(float) for c in combos[1:]),
    )
    cost_columns = np.column_stack(
        [figures[c] for c in ("storage_h", *STORAGE_TIMING)]
    ).round(12)
    # each combo's kept options, as their pairs
    kept: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(first)
    start = 0
    for mine, members in blocks:
        size = len(members) * len(mine)
        cost = cost_columns[start : start + size].reshape(len(members), len(mine), -1)
        no_worse = (cost[:, :, None, :] <= cost[:, None, :, :]).all(axis=3)
        same = (cost[:, :, None, :] == cost[:, None, :, :]).all(axis=3)
        # i beats j: no worse everywhere, and better somewhere or equal and earlier by name
        order = np.arange(len(mine))
        beats = no_worse & (~same | (order[:, None] < order[None, :]))
        beats[:, order, order] = False
        beaten = beats.any(axis=1)
        for at, member in enumerate(members):
            kept[member] = start + at * len(mine) + np.flatnonzero(~beaten[at])
        start += size
    sizes = np.array([len(k) for k in kept], dtype=np.int64)
    counts = sizes[combo_of_row]
    if not counts.any():
        return np.zeros(0, dtype=np.int64), counts, {}
    # each row's combo's options, in turn
    take = np.repeat(
        (np.cumsum(sizes) - sizes)[combo_of_row] - (np.cumsum(counts) - counts), counts
    ) + np.arange(counts.sum())
    pair = np.concatenate(kept).astype(np.int64)[take]
    return option_of_pair[pair], counts, {c: v[pair] for c, v in figures.items()}


def _build_rows(
    workload: Workload,
    catalog: Catalog,
    offers: pd.DataFrame,
    every: _Markets,
    limits: Limits,
) -> Rows:
    """The workload's (offer, market) rows of `every`, repeated once per node count it could run on, with
    storage, egress and the group numbers every call needs, worked out from the rows' codes so a call works
    on arrays."""
    allowed = offer_mask(catalog, workload.allow, workload.forbid, offers).to_numpy()
    if not allowed.any():
        return Rows(
            catalog,
            "no offer in the scenario's catalogs matches its allow/forbid rules",
            0,
        )
    # cost-model §4: `none` cannot resume, so never spot
    resumes = workload.interruption_tolerance != "none"
    open_market = {
        "on_demand": True,
        "spot": resumes,
        "spot_fallback": resumes and bool(workload.time_budget),
    }  # §10: it acts on the slack before it
    markets = every.columns["market"]
    wanted = [m for m in _MARKETS if open_market[m] and workload.allows_market(m)]
    pick = np.flatnonzero(allowed[every.columns[_OFFER_ROW]] & np.isin(markets, wanted))
    ladders = [
        np.array(_node_counts(workload.gpus.min, workload.gpus.max, *combo), dtype=int)
        for combo in every.ladders
    ]
    lengths = np.array([len(ladder) for ladder in ladders], dtype=np.int64)
    sizes = lengths[every.ladder[pick]]
    considered = int(sizes.sum())
    if not considered:
        why = (
            "no offer can host its GPU count range "
            f"{workload.gpus.min}-{workload.gpus.max} (node sizes, multi-node networking, node limits)"
        )
        if (
            workload.interruption_tolerance == "none"
            and offers["on_demand_usd_h"][allowed].isna().all()
        ):
            why = "interruption_tolerance none rules out spot, and no allowed offer has an on-demand price"
        return Rows(catalog, why, 0)
    pick, sizes = pick[sizes > 0], sizes[sizes > 0]
    repeat = np.repeat(pick, sizes)  # each row's (offer, market) row in `every`
    firsts = np.cumsum(sizes) - sizes  # each (offer, market)'s first row
    starts = (np.cumsum(lengths) - lengths)[
        every.ladder[pick]
    ]  # each ladder's place in their concatenation
    nodes = np.concatenate(ladders)[
        np.repeat(starts - firsts, sizes) + np.arange(considered)
    ]
    # then each row once per storage option that no other option of its provider beats for it
    option, copies, figures = _storage_options(
        workload,
        catalog,
        every.columns[_OFFER_ROW][repeat],
        every.columns["provider"][repeat],
        every.columns["instance_type"][repeat],
        nodes,
        every.columns["gpus_per_node"][repeat],
    )
    if not len(option):
        return Rows(
            catalog,
            "no storage option of the allowed offers' providers matches its allow/forbid storage rules",
            0,
        )
    repeat, nodes = np.repeat(repeat, copies), np.repeat(nodes, copies)
    offer_market = np.repeat(np.repeat(np.arange(len(pick)), sizes), copies)
    considered = len(repeat)
    columns = {
        c: every.columns[c][repeat] for c in ROW_COLUMNS if c not in _PER_WORKLOAD
    }
    columns["nodes"], columns["gpus"] = nodes, nodes * columns["gpus_per_node"]
    storage = catalog.storage_table
    columns |= figures
    for column in ("storage_class", "persistent"):
        columns[column] = storage[column].to_numpy()[option]
    columns["storage"] = storage["name"].to_numpy()[option]
    provider = every.columns["provider"][pick]
    per_offer = {  # what depends on the (offer, market) and the workload
        "egress": _egress_usd(
            workload, catalog, provider, every.columns["region"][pick]
        ),
    }
    columns |= {c: v[offer_market] for c, v in per_offer.items()}
    # GPUs drawn from quotas or a capped offer
    units = np.where(every.columns["limited"][repeat], columns["gpus"], 0)
    codes: dict[str, np.ndarray] = {"units": pd.factorize(units)[0]}

    def code(column: str) -> np.ndarray:
        """The column's values as codes, worked out per (offer, market) where no node count enters."""
        if column not in codes:
            codes[column] = (
                pd.factorize(columns[column])[0]
                if column in _PER_NODE_COUNT
                else pd.factorize(per_offer[column], use_na_sentinel=False)[0][
                    offer_market
                ]
            )
        return codes[column]

    def number(names: list[str]) -> np.ndarray:
        """Rows numbered by their values in `names` (`numbered`), from the columns' codes rather than their
        strings: the (offer, market) rows' own columns numbered together once (`_Markets.number`), then the
        rest."""
        own = tuple(n for n in names if n not in _PER_NODE_COUNT and n not in per_offer)
        return numbered(
            every.number(own)[repeat], (code(n) for n in names if n not in own)
        )

    signature = _signature_columns(workload, limits)
    shape = number(SHAPE_COLUMNS)
    first = first_rows(shape)
    return Rows(
        catalog,
        "",
        considered,
        columns=columns,
        offer_row=every.columns[_OFFER_ROW][repeat],
        spot=markets[repeat] != "on_demand",
        fallback=every.columns["fallback"][repeat].astype(bool),
        twin=number(
            [c for c in _TWIN_COLUMNS if c != "spot_rate_per_node_h"] + signature
        ),
        timing=number([c for c in TIMING_COLUMNS if c != "spot_rate_per_node_h"]),
        signature=number(signature),
        kind=number(["instance_type", "market"]),
        units=units.astype(float),
        events_per_loss=events_per_loss(nodes, columns["correlation"].astype(float)),
        key_rank=every.code("key", sort=True)[repeat],
        market_rank=every.code("market", sort=True)[repeat],
        shape=shape,
        shapes=[
            Shape(*s) for s in zip(*(columns[c][first].tolist() for c in SHAPE_COLUMNS))
        ],
        grouped=any(grouped(workload, limits)),
    )


def row_prices(
    rows: Rows, prices: dict[str, np.ndarray], stateless: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This call's price, spot preemption rate and fallback (on-demand) price per row (NaN but on
    spot_fallback rows), mapped in from its offers' `offer_prices`."""

    def column(name: str) -> np.ndarray:
        return prices[name][rows.offer_row]

    price = np.where(rows.spot, column("spot_usd_h"), column("on_demand_usd_h"))
    nodes = rows.columns["nodes"].astype(float)
    lam_node = np.nan_to_num(column("spot_preemption_per_h"), nan=0.0)
    # candidate.spot_event_rate
    events = lam_node * (nodes if stateless else rows.events_per_loss)
    # preemption events per node-hour as the job sees them (§3, §4)
    lam = np.where(rows.spot, events / nodes, 0.0)
    return price, lam, np.where(rows.fallback, column("on_demand_usd_h"), np.nan)
