"""Rows left unpriced until a plan could want them (`generate(lazy=True)`; `solve/lazy.py` asks).

A workload's front rows whose cost bound is above a candidate already priced for it are deferred: without
shared limits no plan picks them, and with limits only where a quota or node cap pushes the workload off
its cheaper candidates, which the LP relaxation's reduced costs tell. Each class of workloads alike keeps its
deferred rows and the means to price them; `Pending` stands them in for the LP (their bound as their cost)
and rebuilds the candidate tables once some are priced.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from planner.candidates.limits import COST_RESOLUTION_USD
from planner.candidates.tables import pareto, records_table, stacked, with_rows


@dataclass
class Deferred:
    """One class's front rows left unpriced: each dearer by its bound `lo` than a candidate already priced.
    `price(places)` prices some exactly and gives each one's cost as a candidate (inf where it is none);
    `finish()` gives the class's candidates as they stand (the generation's (records, reason, rows considered,
    `pareto`'s signature, limited GPUs and anywhere))."""

    at: np.ndarray  # the rows' places in the workload's pricing order
    lo: np.ndarray
    rows: list  # their `Row`s: offer, market, nodes and GPUs, what a stand-in reads
    price: Callable[[Iterable[int]], list[float]]
    finish: Callable[[], tuple]

    def __post_init__(self) -> None:
        self.left = np.ones(len(self.at), dtype=bool)  # not priced yet


@dataclass
class ClassResult:
    """A class of workloads alike: its candidates (`all`), its Pareto front, why it has none, rows considered,
    its first member's name (what cids start with), and its purchase options' records."""

    all: pd.DataFrame
    reason: str
    considered: int
    front: pd.DataFrame
    name: str
    bought: pd.DataFrame


STUB_COLUMNS = ("gpu", "gpu_family", "gpus", "nodes", "market", "max_nodes")


@dataclass
class Pending:
    """Every class's deferred rows, and the tables they are kept out of."""

    results: list[ClassResult]
    # (class, workload name) of every workload with candidates
    members: list[tuple[int, str]]
    deferred: dict[int, Deferred]
    _every: pd.DataFrame | None = field(default=None, init=False, repr=False)

    @property
    def left(self) -> int:
        """Rows of the plan's workloads still unpriced."""
        count = {c: int(d.left.sum()) for c, d in self.deferred.items()}
        return sum(count.get(c, 0) for c, _ in self.members)

    def stand_ins(self) -> pd.DataFrame:
        """A row per member and unpriced row, as the LP reads a candidate: its bound as its cost (whole cents
        rounded down, so never above the cents the exact cost would round to). `klass` and `place` say which;
        the index is the row's place in `every()`, whose rows the calls share."""
        every = self.every()
        if not len(every):
            return every
        left = np.concatenate(
            [self.deferred[c].left for c, _ in self.members if c in self.deferred]
        )
        return every[left]

    def every(self) -> pd.DataFrame:
        """`stand_ins()` of every deferred row, priced since or not: built once, as it is what a round reads."""
        if self._every is None:
            self._every = self._stand_ins()
        return self._every

    def _stand_ins(self) -> pd.DataFrame:
        parts = []
        for c, name in self.members:
            d = self.deferred.get(c)
            if d is None:
                continue
            rows = d.rows
            parts.append(
                pd.DataFrame(
                    {
                        "cid": [
                            f"{name}|{r.key}|{r.market}|x{int(r.nodes)}|{r.storage}|unpriced"
                            for r in rows
                        ],
                        "workload": name,
                        "offer_key": [r.key for r in rows],
                        "provider": [r.provider for r in rows],
                        "region": [r.region for r in rows],
                        **{
                            col: [getattr(r, col) for r in rows] for col in STUB_COLUMNS
                        },
                        "cost_cents": np.floor(
                            d.lo / COST_RESOLUTION_USD + 1e-9
                        ).astype(np.int64),
                        "wall_h": math.nan,
                        "klass": c,
                        "place": np.arange(len(rows)),
                    }
                )
            )
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def price(self, wanted: pd.DataFrame, fronts: pd.Series | None = None) -> int:
        """Price the stand-ins `wanted` (rows of `stand_ins()`), each class's once; how many rows that was.
        With `fronts` (a label per wanted row) each label's rows are priced cheapest bound first only until
        the next bound is above the cheapest cost found among them: the rest are dearer in the LP's eyes
        than a row alike in the limits, and the LP asks again for any it still wants."""
        count = 0
        for c, group in wanted.groupby("klass"):
            d = self.deferred[int(c)]
            if fronts is None:
                places = np.unique(group["place"].to_numpy())
                places = places[d.left[places]]
                d.left[places] = False
                d.price(d.at[places])
                count += len(places)
            else:
                for _, places in group.groupby(fronts.loc[group.index])["place"]:
                    count += _price_front(d, np.unique(places.to_numpy()))
            records, reason, considered, limited = d.finish()
            frame = records_table(records)
            front = pareto(frame, *limited) if limited is not None else frame
            old = self.results[int(c)]
            if len(old.bought):
                frame, front = (
                    with_rows(frame, old.bought),
                    with_rows(front, old.bought),
                )
            self.results[int(c)] = ClassResult(
                frame, old.reason, considered, front, old.name, old.bought
            )
        return count

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(all candidates, the Pareto fronts) of every member, as `CandidateSet` holds them."""
        return self._stacked("all"), self._stacked("front")

    def _stacked(self, which: str) -> pd.DataFrame:
        return stacked(
            [(getattr(r, which), r.name) for r in self.results], self.members
        )


def _price_front(d: Deferred, places: np.ndarray) -> int:
    """Price `places` of `d` cheapest bound first until the next bound is above the cheapest cost found."""
    cheapest, count = math.inf, 0
    for place in places[np.argsort(d.lo[places], kind="stable")]:
        if d.lo[place] > cheapest:
            break
        if d.left[place]:
            d.left[place] = False
            cheapest = min(cheapest, *d.price([d.at[place]]))
            count += 1
    return count
