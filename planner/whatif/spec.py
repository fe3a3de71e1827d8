"""What a sweep is asked for: the parameters it may sweep, their ranges and `--where` conditions as the command
line writes them, checked against the file and its catalogs, and the grid of points they make.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from planner.errors import PlannerError
from planner.schema.fields import MAX_MULTIPLIER

PARAMETERS = (
    "spot_price_multiplier",
    "preemption_multiplier",
    "on_demand_price_multiplier",
    "rate_multiplier",
)
OPTIONS = {
    "spot_price_multiplier": "--spot-price",
    "preemption_multiplier": "--preemption",
    "on_demand_price_multiplier": "--on-demand-price",
    "rate_multiplier": "--rate",
}
SHORT = {
    "spot_price_multiplier": "spot",
    "preemption_multiplier": "preempt",
    "on_demand_price_multiplier": "on_demand",
    "rate_multiplier": "rate",
}
RATE = "rate_multiplier"
"""The endpoints' traffic: as it grows their node counts grow by design, so along it a switch is a change of
pools (GPU type, market, TP degree), not of node counts."""
# "--spot-price, --preemption, --on-demand-price, --rate", for messages
NAMED = ", ".join(OPTIONS.values())
WHERE_KEYS = ("provider", "gpu", "region", "instance_type")
DEFAULT_PRECISION = 0.005
MAX_POINTS = 10_000


def sweep_axes(given: dict[str, str | None]) -> dict[str, list[float]]:
    """The axes the command line asks for (parameter -> its range text, None when not given): at least
    one, and at most two with several values (a sweep is a line or a grid)."""
    if not any(given.values()):
        raise PlannerError(f"give at least one of {NAMED}", "whatif")
    axes = {p: parse_range(text, OPTIONS[p]) for p, text in given.items() if text}
    if sum(len(v) > 1 for v in axes.values()) > 2:
        raise PlannerError(
            f"at most two of {NAMED} may have several values; give the others one value",
            "whatif",
        )
    return axes


def parse_range(text: str, option: str) -> tuple[float, ...]:
    """`start:stop:points` (evenly spaced, both ends included) or a comma list; multipliers > 0."""
    text = (text or "").strip()
    example = (
        "expected start:stop:points (e.g. 0.5:2.0:16) or a comma list (e.g. 0.8,1,1.25)"
    )
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise PlannerError(f"{example}, got {text!r}", option)
        try:
            start, stop = float(parts[0]), float(parts[1])
        except ValueError:
            raise PlannerError(f"{example}, got {text!r}", option) from None
        if not re.fullmatch(r"\s*\d+\s*", parts[2]):
            raise PlannerError(
                f"the number of points must be a whole number, got {parts[2]!r} in {text!r}",
                option,
            )
        points = int(parts[2])
        _check_positive((start, stop), text, option)
        if points < 2 or points > MAX_POINTS:
            raise PlannerError(
                f"points must be between 2 and {MAX_POINTS:,}, got {points} in {text!r}",
                option,
            )
        if not stop > start:
            raise PlannerError(f"stop must be greater than start, got {text!r}", option)
        step = (stop - start) / (points - 1)
        values = tuple(round(start + i * step, 12) for i in range(points))
        if (
            values[0] <= 0 or len(set(values)) < points
        ):  # the grid is kept to 12 decimals
            raise PlannerError(
                f"{points} points from {start:g} to {stop:g} are not distinct at 12 decimals, "
                f"got {text!r}; give fewer points, a wider range or a comma list",
                option,
            )
        return values
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise PlannerError(f"{example}, got {text!r}", option) from None
    if not values:
        raise PlannerError(f"{example}, got {text!r}", option)
    _check_positive(values, text, option)
    if len(values) > MAX_POINTS:
        raise PlannerError(
            f"at most {MAX_POINTS:,} points, got {len(values):,}", option
        )
    return tuple(sorted(set(values)))


def _check_positive(values: Iterable[float], text: str, option: str) -> None:
    """Multipliers above 0; of prices and preemption rates at most MAX_MULTIPLIER, as the file's own overrides
    (`--rate` is held to the traffic it gives: `check_rate`)."""
    most = math.inf if option == OPTIONS[RATE] else MAX_MULTIPLIER
    for v in values:
        if not (0 < v <= most and math.isfinite(v)):
            bound = f" and at most {most:,.0f}" if math.isfinite(most) else ""
            raise PlannerError(
                f"multipliers must be finite, greater than 0{bound}, got {v:g} in {text!r}",
                option,
            )


def check_rate(values: Iterable[float], workloads) -> None:
    """`--rate` scales endpoints' traffic: the file must have an endpoint, and the largest rate stays in bounds."""
    from planner.schema.endpoint import MAX_REQUESTS_PER_S

    endpoints = [w for w in workloads if w.serving]
    if not endpoints:
        raise PlannerError(
            "multiplies the traffic of serving endpoints (kind: serving), and the file has none",
            "--rate",
        )
    peak = max(endpoints, key=lambda w: w.traffic.peak)
    if peak.traffic.peak * max(values) > MAX_REQUESTS_PER_S:
        raise PlannerError(
            f"x{max(values):g} takes {peak.name!r} from {peak.traffic.peak:g} to "
            f"{peak.traffic.peak * max(values):g} requests/s, above the {MAX_REQUESTS_PER_S:g} "
            "the planner accepts",
            "--rate",
        )


def parse_where(items: Iterable[str]) -> dict[str, str]:
    """`provider=aws,gpu=H100` (repeatable) -> {key: value}; keys: provider, gpu, region, instance_type."""
    where: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not value:
                raise PlannerError(
                    f"expected key=value pairs such as provider=aws,gpu=H100, got {part.strip()!r}",
                    "--where",
                )
            if key not in WHERE_KEYS:
                from planner.errors import did_you_mean

                raise PlannerError(
                    f"unknown key {key!r}{did_you_mean(key, WHERE_KEYS)}; expected one of "
                    f"{', '.join(WHERE_KEYS)}",
                    "--where",
                )
            if key in where and where[key] != value:
                raise PlannerError(
                    f"{key} given twice ({where[key]!r} and {value!r})", "--where"
                )
            where[key] = value
    return where


def check_where(where: dict[str, str], catalog) -> None:
    """Every `--where` value names something the scenario's catalogs offer, and together they match an offer."""
    from planner.errors import did_you_mean

    offers = catalog.offers
    for key, column in (
        ("provider", "provider"),
        ("region", "region"),
        ("instance_type", "instance_type"),
    ):
        if key in where and where[key] not in set(offers[column]):
            raise PlannerError(
                f"unknown {key} {where[key]!r}{did_you_mean(where[key], set(offers[column]))} "
                "in the scenario's catalogs",
                "--where",
            )
    if "gpu" in where and not catalog.knows_gpu(where["gpu"]):
        raise PlannerError(
            f"unknown GPU {where['gpu']!r}{did_you_mean(where['gpu'], catalog.gpu_names_and_families())}",
            "--where",
        )
    if where and not _where_mask(where, catalog).any():
        raise PlannerError(
            f"no offer matches {', '.join(f'{k}={v}' for k, v in where.items())}",
            "--where",
        )


def _where_mask(where: dict[str, str], catalog):
    offers = catalog.offers
    mask = offers["provider"].notna()
    for key in ("provider", "region", "instance_type"):
        if key in where:
            mask &= offers[key] == where[key]
    if "gpu" in where:
        mask &= offers["gpu"].map(lambda g: catalog.gpu_matches(g, where["gpu"]))
    return mask


@dataclass(frozen=True)
class SweepSpec:
    source: str
    axes: dict[
        str, tuple[float, ...]
    ]  # parameter -> values; at most two with more than one value
    where: tuple[tuple[str, str], ...] = ()
    precision: float = DEFAULT_PRECISION
    time_limit_s: float = 60.0
    seed: int = 0

    @property
    def swept(self) -> list[str]:
        return [p for p in PARAMETERS if len(self.axes.get(p, (1.0,))) > 1]


def grid(spec: SweepSpec) -> list[dict[str, float]]:
    """Every point of the sweep; the first swept parameter varies fastest."""
    import itertools

    values = [spec.axes.get(p, (1.0,)) for p in PARAMETERS]
    # swept axes first
    order = sorted(range(len(PARAMETERS)), key=lambda i: (len(values[i]) == 1, i))
    points = []
    for combo in itertools.product(*(values[i] for i in reversed(order))):
        point = dict(zip((PARAMETERS[i] for i in reversed(order)), combo))
        points.append({p: point[p] for p in PARAMETERS})
    return points
