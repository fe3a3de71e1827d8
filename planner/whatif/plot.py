"""Plots of a what-if sweep: cost against one multiplier (switches marked, spot/on-demand share of
spending), or heat maps over two. PNG, or a self-contained HTML page with the figure as inline SVG."""

from __future__ import annotations

import html
import io
from pathlib import Path

from planner.errors import PlannerError
from planner.files import check_target, write_atomic
from planner.whatif.result import SweepResult
from planner.whatif.spec import PARAMETERS

LABELS = {
    "spot_price_multiplier": "spot price multiplier",
    "preemption_multiplier": "preemption rate multiplier",
    "on_demand_price_multiplier": "on-demand price multiplier",
    "rate_multiplier": "endpoint traffic multiplier",
}


def figure(result: SweepResult):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    swept = result.spec.swept
    if len(swept) == 2:
        return _heat_maps(
            result, swept, Figure(figsize=(11, 4.6), layout="constrained")
        )
    return _lines(
        result,
        swept[0] if swept else PARAMETERS[0],
        Figure(figsize=(9, 6.4), layout="constrained"),
    )


def _lines(result: SweepResult, parameter: str, fig):
    x = [p.multipliers[parameter] for p in result.points]
    cost = [
        p.objective_usd if p.objective_usd is not None else float("nan")
        for p in result.points
    ]
    spot = [p.spend_usd.get("spot", 0.0) for p in result.points]
    on_demand = [p.spend_usd.get("on_demand", 0.0) for p in result.points]
    share = [
        s / (s + o) * 100 if s + o > 0 else float("nan")
        for s, o in zip(spot, on_demand)
    ]
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(2.2, 1))
    top.plot(
        x, cost, marker="o", markersize=3, color="#1f4e79", label="total expected cost"
    )
    top.set_ylabel("expected total cost (USD)")
    top.set_title(
        f"{result.spec.source}: optimal plan against the {LABELS[parameter]}",
        fontsize=10,
    )
    top.grid(alpha=0.3)
    seen = {}
    for s in result.switches:
        if s["parameter"] != parameter:
            continue
        seen.setdefault(round(s["at"], 6), []).append(s)
    for at, group in sorted(seen.items()):
        for axis in (top, bottom):
            axis.axvline(at, color="#c0504d", linestyle="--", linewidth=0.8, alpha=0.8)
        names = [s["workload"] for s in group]
        text = (
            f"x{at:.4g}: "
            + ", ".join(names[:3])
            + (f" +{len(names) - 3}" if len(names) > 3 else "")
        )
        label = top.annotate(
            text,
            (at, 0.03),
            xycoords=("data", "axes fraction"),
            xytext=(-2, 0),
            textcoords="offset points",
            fontsize=7,
            va="bottom",
            ha="right",
            rotation=90,
            color="#7f1f1c",
            clip_on=True,
        )
        label.set_in_layout(False)  # long labels must not squeeze the axes
    if seen:
        top.plot(
            [],
            [],
            color="#c0504d",
            linestyle="--",
            linewidth=0.8,
            label="placement switch",
        )
    top.legend(loc="lower right", fontsize=8)
    bottom.stackplot(
        x,
        share,
        [100 - v for v in share],
        labels=("spot", "on-demand"),
        colors=("#9bbb59", "#4f81bd"),
        alpha=0.85,
    )
    bottom.set_ylim(0, 100)
    bottom.set_ylabel("share of spending (%)")
    bottom.set_xlabel(LABELS[parameter])
    bottom.legend(loc="upper right", fontsize=8)
    return fig


def _heat_maps(result: SweepResult, swept: list[str], fig):
    import numpy as np

    xs, ys = result.spec.axes[swept[0]], result.spec.axes[swept[1]]
    cost = np.full((len(ys), len(xs)), np.nan)
    share = np.full((len(ys), len(xs)), np.nan)
    for p in result.points:
        i, j = ys.index(p.multipliers[swept[1]]), xs.index(p.multipliers[swept[0]])
        if p.objective_usd is not None:
            cost[i, j] = p.objective_usd
        total = sum(p.spend_usd.values())
        if total > 0:
            share[i, j] = p.spend_usd.get("spot", 0.0) / total * 100
    left, right = fig.subplots(1, 2)
    for axis, data, label, cmap in (
        (left, cost, "expected total cost (USD)", "viridis"),
        (right, share, "spot share of spending (%)", "RdYlGn"),
    ):
        mesh = axis.pcolormesh(_edges(xs), _edges(ys), data, cmap=cmap, shading="flat")
        fig.colorbar(mesh, ax=axis, label=label)
        axis.set_xlabel(LABELS[swept[0]])
        axis.set_ylabel(LABELS[swept[1]])
        sx = [s[swept[0]] for s in result.switches]
        sy = [s[swept[1]] for s in result.switches]
        axis.scatter(
            sx,
            sy,
            s=9,
            marker="x",
            color="#c0504d",
            linewidths=0.8,
            label="placement switch",
        )
    left.legend(loc="upper left", fontsize=7)
    fig.suptitle(
        f"{result.spec.source}: optimal plan over two multipliers", fontsize=10
    )
    return fig


def _edges(values) -> list[float]:
    """Cell edges halfway between grid values (a single value gets a small cell)."""
    if len(values) == 1:
        return [values[0] - 0.05, values[0] + 0.05]
    mids = [(a + b) / 2 for a, b in zip(values, values[1:])]
    return [
        values[0] - (mids[0] - values[0]),
        *mids,
        values[-1] + (values[-1] - mids[-1]),
    ]


def write_plot(
    result: SweepResult, path: Path, protected: tuple[Path, ...] = ()
) -> None:
    """PNG for `.png`, a self-contained HTML page (inline SVG) for `.html`/`.htm`."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise PlannerError(
            f"expected a .png or .html file name, got {path.name!r}", "--plot"
        )
    check_target(path, protected)
    import matplotlib

    from planner.report.gantt import LITERAL_TEXT

    with matplotlib.rc_context(LITERAL_TEXT):
        fig = figure(result)
        buffer = io.BytesIO()
        if suffix == ".png":
            fig.savefig(buffer, format="png", dpi=130)
            data = buffer.getvalue()
        else:
            fig.savefig(buffer, format="svg")
            data = _page(result, buffer.getvalue().decode("utf-8")).encode("utf-8")
    write_atomic(path, data, protected)


def _page(result: SweepResult, svg: str) -> str:
    svg = svg[
        svg.index("<svg") :
    ]  # drop the XML prolog and doctype: inline SVG needs neither
    rows = "".join(
        f"<tr><td>{html.escape(s['workload'])}</td><td>{html.escape(s['parameter'])}</td><td>{s['at']:g}</td>"
        f"<td>{html.escape(s['from'] or '-')}</td><td>{html.escape(s['to'] or '-')}</td></tr>"
        for s in result.switches
    )
    table = (
        f"<table><tr><th>workload</th><th>parameter</th><th>at</th><th>from</th><th>to</th></tr>{rows}</table>"
        if rows
        else "<p>No placement changes between grid points.</p>"
    )
    title = html.escape(f"planner whatif: {result.spec.source}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:0.85em}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}svg{max-width:100%;height:auto}</style>"
        f"</head><body><h1>{title}</h1>\n{svg}\n<h2>Switch points (precision {result.spec.precision:g})</h2>"
        f"{table}</body></html>\n"
    )
