"""What candidate generation keeps between workloads of one call and between calls (a sweep's points).

One object, owned by whoever asks for candidates (one `solve` or `batch`, one what-if worker), so
nothing is kept behind a caller's back; every part is bounded and keyed on what its values depend
on, and the whole belongs to one catalog (handing it another empties it).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field


@contextmanager
def without_cycle_collection():
    """Python's cycle collector paused while a plan is made: generating and pricing candidates allocates millions
    of small objects and keeps many, so the collector's full passes traverse an ever larger heap (13 % of the
    time of 1,000 varied workloads: 18 passes of ~0.85 s), while planning makes no cycles worth their cost.
    Reference counting frees as always; the collector resumes after, as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class CandidateCache:
    # (offers without prices, limits) -> every (offer, market) row
    markets: dict = field(default_factory=dict)
    # expansion class -> expanded rows with their physics and screens
    rows: dict = field(default_factory=dict)
    # (workload physics, shape, headroom) -> Estimate
    estimates: dict = field(default_factory=dict)
    # (cost settings, timing key, W, item time) -> exact cost at price 1
    exact: dict = field(default_factory=dict)
    # segment plan -> wall_time.WallLaw (P(T <= D) at any D, quantiles)
    laws: dict = field(default_factory=dict)
    # expanded rows kept (~1 GB); past it a sweep rebuilds rows per point
    max_rows: int = 2_000_000
    max_entries: int = 500_000  # estimates and exact costs, each
    max_laws: int = 2048  # a law holds its CDF on the grid (64-512 KB)
    max_markets: int = 8  # each every offer's rows (a few MB)
    catalog: object = field(default=None, repr=False)
    priced: int = 0  # rows priced exactly so far (a count, for reports)

    def bind(self, catalog) -> CandidateCache:
        """This cache for `catalog`: emptied first when it was filled for another one."""
        if self.catalog is not catalog:
            for part in (
                self.markets,
                self.rows,
                self.estimates,
                self.exact,
                self.laws,
            ):
                part.clear()
            self.catalog = catalog
        return self

    def keep(self, part: dict, key, value):
        """Store `value` under `key` in `part`, emptying the part first when it is full."""
        limit = (
            self.max_laws
            if part is self.laws
            else self.max_markets
            if part is self.markets
            else self.max_entries
        )
        if len(part) >= limit:
            part.clear()
        part[key] = value
        return value
