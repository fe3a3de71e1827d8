"""A Gantt chart of a `planner batch` schedule, drawn from the batch JSON (`batch_json`).

One lane per offer (provider/region/instance_type); runs that overlap on an offer stack in
sub-rows of its lane. Bars are coloured by market; a reservation's term is a shaded band
across its offer's lane, labelled with the nodes bought and their utilisation. `.png` gives
a picture; `.html` a self-contained page with the figure as inline SVG and a table of runs.

matplotlib (Agg backend) is imported inside `write_gantt` so `planner --help` stays fast.
"""

from __future__ import annotations

import datetime as dt
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

from planner.errors import PlannerError

MARKET_COLOURS = {
    "spot": "#f28e2b",
    "spot_fallback": "#edc948",
    "on_demand": "#4e79a7",
    "reserved": "#59a14f",
}
MARKET_LABELS = {
    "spot": "spot",
    "spot_fallback": "spot, on-demand fallback",
    "on_demand": "on-demand",
    "reserved": "reserved",
}
OTHER_COLOUR = "#9c9c9c"
BAND_COLOUR = "#59a14f"


@dataclass
class Lane:
    key: tuple[str, str, str]
    # sub-rows of non-overlapping runs
    rows: list[list[dict]] = field(default_factory=list)
    reservations: list[dict] = field(default_factory=list)

    @property
    def height(self) -> int:
        return max(1, len(self.rows))

    @property
    def label(self) -> str:
        provider, region, instance = self.key
        text = f"{provider}/{region}\n{instance}"
        for r in self.reservations:
            nodes = int(r.get("nodes", 0))
            if nodes:
                text += f"\nreserved {nodes} node{'s' if nodes != 1 else ''}, {r.get('utilisation', 0.0):.0%} used"
            else:
                text += "\nreservation option not bought"
        return text


def _time(value: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def bar_label(run: dict) -> str:
    nodes = int(run.get("nodes", 1))
    return f"{run['run']} ×{nodes}" if nodes > 1 else run["run"]


def endpoint_bars(schedule: dict) -> list[dict]:
    """Each endpoint's pools as run-like bars over its window: one per offer and market, with the most
    nodes it runs in any period of the day."""
    bars = {}
    for e in schedule.get("endpoints") or []:
        for period in e["periods"]:
            for pool in period["pools"]:
                key = (
                    e["workload"],
                    pool["provider"],
                    pool["region"],
                    pool["instance_type"],
                    pool["market"],
                )
                bar = bars.setdefault(
                    key,
                    {
                        "run": f"{e['workload']} (endpoint)",
                        "start": e["start"],
                        "end": e["end"],
                        "provider": pool["provider"],
                        "region": pool["region"],
                        "instance_type": pool["instance_type"],
                        "market": pool["market"],
                        "nodes": 0,
                    },
                )
                bar["nodes"] = max(bar["nodes"], int(pool["nodes"]))
    return [bar for bar in bars.values() if bar["nodes"]]


def build_lanes(schedule: dict, label_h_per_char: float = 0.0) -> list[Lane]:
    """Lanes in drawing order: offers with a reservation bought first, then by first start.

    Runs overlapping on one offer go to separate sub-rows (first fit in start order). A run
    whose bar is too short for its name has the name drawn after the bar, so it occupies
    the row up to the end of that text (`label_h_per_char` hours per character).
    """
    lanes: dict[tuple[str, str, str], Lane] = {}
    runs = sorted(
        [r for r in schedule.get("runs", []) if r.get("scheduled")]
        + endpoint_bars(schedule),
        key=lambda r: (r["start"], r["end"], r["run"]),
    )
    occupied: dict[int, dt.datetime] = {}
    for run in runs:
        key = (run["provider"], run["region"], run["instance_type"])
        lane = lanes.setdefault(key, Lane(key))
        start, end = _time(run["start"]), _time(run["end"])
        text_h = (len(bar_label(run)) + 2) * label_h_per_char
        if (end - start).total_seconds() / 3600 < text_h:
            end = end + dt.timedelta(hours=text_h)
        occupied[id(run)] = end
        for (
            row
        ) in lane.rows:  # first sub-row that is free again (interval partitioning)
            if occupied[id(row[-1])] <= start:
                row.append(run)
                break
        else:
            lane.rows.append([run])
    for reservation in schedule.get("reservations", []):
        key = (
            reservation["provider"],
            reservation["region"],
            reservation["instance_type"],
        )
        if reservation.get("nodes", 0) > 0 or key in lanes:
            lanes.setdefault(key, Lane(key)).reservations.append(reservation)

    def order(lane: Lane):
        bought = any(r.get("nodes", 0) > 0 for r in lane.reservations)
        first = min((row[0]["start"] for row in lane.rows), default="")
        return (not bought, first, lane.key)

    return sorted(lanes.values(), key=order)


def _title(schedule: dict) -> str:
    status = schedule.get("status", "")
    objective = schedule.get("objective_usd")
    scheduled = sum(1 for r in schedule.get("runs", []) if r.get("scheduled"))
    text = f"{status}: {scheduled} runs scheduled"
    if endpoints := len(schedule.get("endpoints") or []):
        text += f" and {endpoints} endpoint{'s' if endpoints > 1 else ''}"
    if objective is not None:
        text += f", expected total ${objective:,.0f}"
        bound = schedule.get("bound_usd")
        if bound is not None and status != "OPTIMAL" and objective:
            text += (
                f" (gap {max(0.0, (objective - bound) / objective):.1%} to the bound)"
            )
    return text


def draw(schedule: dict):
    """The matplotlib figure of a schedule (Agg backend)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    width_in, axes_width_in = 15.0, 11.0
    dates = [
        _time(r[k])
        for r in schedule.get("runs", [])
        if r.get("scheduled")
        for k in ("start", "end")
    ]
    dates += [
        _time(r[k]) for r in schedule.get("reservations", []) for k in ("start", "end")
    ]
    if not dates:
        dates = [
            dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
            dt.datetime(2000, 1, 2, tzinfo=dt.UTC),
        ]
    first, last = min(dates), max(dates)
    span_h = max(1.0, (last - first).total_seconds() / 3600)
    h_per_char = span_h / axes_width_in * 0.052  # ~0.052 in per character at 6.5 pt
    lanes = build_lanes(schedule, h_per_char)
    total_rows = sum(lane.height for lane in lanes) or 1
    fig_height = min(60.0, 1.9 + 0.36 * total_rows + 0.12 * len(lanes))
    fig, ax = plt.subplots(figsize=(width_in, fig_height), dpi=100)
    row_h = 0.78
    y = 0
    ticks, tick_labels = [], []
    for index, lane in enumerate(lanes):
        top, height = y, lane.height
        if index % 2:
            ax.axhspan(top - 0.5, top + height - 0.5, color="#f3f3f3", zorder=0, lw=0)
        for reservation in lane.reservations:
            start, end = (
                mdates.date2num(_time(reservation["start"])),
                mdates.date2num(_time(reservation["end"])),
            )
            if int(reservation.get("nodes", 0)) > 0:
                ax.broken_barh(
                    [(start, end - start)],
                    (top - 0.5, height),
                    facecolors=BAND_COLOUR,
                    alpha=0.18,
                    edgecolor=BAND_COLOUR,
                    hatch="//",
                    linewidth=0.8,
                    zorder=1,
                )
            else:
                ax.broken_barh(
                    [(start, end - start)],
                    (top - 0.5, height),
                    facecolors="none",
                    edgecolor="#bbbbbb",
                    linestyle="--",
                    linewidth=0.8,
                    zorder=1,
                )
        for r, row in enumerate(lane.rows):
            for run in row:
                start_t, end_t = _time(run["start"]), _time(run["end"])
                start, end = mdates.date2num(start_t), mdates.date2num(end_t)
                colour = MARKET_COLOURS.get(run.get("market", ""), OTHER_COLOUR)
                ax.broken_barh(
                    [(start, end - start)],
                    (top + r - row_h / 2, row_h),
                    facecolors=colour,
                    edgecolor="white",
                    linewidth=0.6,
                    zorder=3,
                )
                text = bar_label(run)
                fits = (end_t - start_t).total_seconds() / 3600 >= (
                    len(text) + 2
                ) * h_per_char
                if fits:
                    ax.text(
                        (start + end) / 2,
                        top + r,
                        text,
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white",
                        zorder=5,
                    )
                elif last - end_t < dt.timedelta(
                    hours=(len(text) + 2) * h_per_char
                ):  # no room on the right
                    ax.text(
                        start,
                        top + r,
                        text + " ",
                        ha="right",
                        va="center",
                        fontsize=6.5,
                        color="#333333",
                        zorder=5,
                    )
                else:
                    ax.text(
                        end,
                        top + r,
                        " " + text,
                        ha="left",
                        va="center",
                        fontsize=6.5,
                        color="#333333",
                        zorder=5,
                    )
        ticks.append(top + (height - 1) / 2)
        tick_labels.append(lane.label)
        y += height
    ax.set_yticks(ticks)
    ax.set_yticklabels(tick_labels, fontsize=7)
    ax.set_ylim(y - 0.5, -0.5)  # first lane at the top
    ax.set_xlim(mdates.date2num(first), mdates.date2num(last))
    locator = mdates.AutoDateLocator(minticks=6, maxticks=16)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.grid(axis="x", color="#dddddd", linewidth=0.6, zorder=0)
    ax.set_axisbelow(True)
    ax.set_xlabel("date (UTC)")
    ax.set_title(_title(schedule), loc="left", fontsize=10)
    handles = [
        Patch(facecolor=MARKET_COLOURS[m], label=MARKET_LABELS[m])
        for m in MARKET_COLOURS
    ]
    handles.append(
        Patch(
            facecolor=BAND_COLOUR,
            alpha=0.25,
            hatch="//",
            edgecolor=BAND_COLOUR,
            label="reservation term\n(nodes bought)",
        )
    )
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=8,
        frameon=False,
    )
    left_out = [u["run"] for u in schedule.get("unscheduled", [])]
    if left_out:
        shown = ", ".join(left_out[:12]) + (
            f" and {len(left_out) - 12} more" if len(left_out) > 12 else ""
        )
        fig.text(
            0.01,
            0.005,
            f"left out: {shown}",
            fontsize=7.5,
            color="#a33333",
            ha="left",
            va="bottom",
        )
    fig.tight_layout(rect=(0, 0.02 if left_out else 0, 1, 1))
    return fig


def _page(schedule: dict, svg: str) -> str:
    esc = html.escape
    rows = []
    for run in schedule.get("runs", []):
        if run.get("scheduled"):
            offer = f"{run['provider']}/{run['region']}/{run['instance_type']}"
            cells = [
                run["run"],
                run["start"][:16],
                run["end"][:16],
                offer,
                run["nodes"],
                run["gpus"],
                MARKET_LABELS.get(run["market"], run["market"]),
                f"{run['cost_usd']:,.2f}",
            ]
        else:
            cells = [
                run["run"],
                "-",
                "-",
                f"left out: {run.get('reason', '')}",
                "",
                "",
                "",
                "",
            ]
        rows.append(
            "<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>"
        )
    reservations = []
    for r in schedule.get("reservations", []):
        cells = [
            r.get("name", ""),
            f"{r['provider']}/{r['region']}/{r['instance_type']}",
            r["nodes"],
            r["start"][:10],
            r["end"][:10],
            f"{r['utilisation']:.0%}",
            f"{r['cost_usd']:,.2f}",
        ]
        reservations.append(
            "<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>"
        )
    head = lambda names: "<tr>" + "".join(f"<th>{esc(n)}</th>" for n in names) + "</tr>"  # noqa: E731
    reservation_table = ""
    if reservations:
        reservation_table = (
            "<h2>Reservations</h2><table>"
            + head(
                ["name", "offer", "nodes", "start", "end", "utilisation", "cost_usd"]
            )
            + "".join(reservations)
            + "</table>"
        )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{esc(_title(schedule))}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
svg {{ max-width: 100%; height: auto; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }}
th {{ background: #f0f0f0; }}
</style>
</head>
<body>
<h1>{esc(_title(schedule))}</h1>
{svg}
<h2>Runs</h2>
<table>
{head(["run", "start (UTC)", "end (UTC)", "offer", "nodes", "gpus", "market", "cost_usd"])}
{chr(10).join(rows)}
</table>
{reservation_table}
</body>
</html>
"""


LITERAL_TEXT = {"text.parse_math": False}
"""Names are data: `run-${DATE}` or `cost $5_$10` is drawn as written, never read as mathtext (which raises on
some and silently typesets others)."""


def write_gantt(schedule: dict, path: Path, protected: tuple[Path, ...] = ()) -> None:
    """Draw `schedule` (the batch JSON) to `path`: `.png`, or `.html` with inline SVG and a run table.

    Written atomically (temporary file in the same folder, then rename); never over a `protected` path.
    """
    from planner.files import check_target, write_atomic

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".png", ".html"):
        raise PlannerError("expected a .png or .html file name", str(path))
    check_target(path, tuple(protected))
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(LITERAL_TEXT):
        fig = draw(schedule)  # its texts keep the setting they were made with
    try:
        buffer = io.BytesIO() if suffix == ".png" else io.StringIO()
        if suffix == ".html":
            with matplotlib.rc_context(
                {
                    "svg.hashsalt": "planner-gantt",
                    "svg.fonttype": "none",
                    **LITERAL_TEXT,
                }
            ):
                fig.savefig(buffer, format="svg", metadata={"Date": None})
            svg = buffer.getvalue()
            svg = svg[
                svg.index("<svg") :
            ]  # drop the XML prolog and doctype: inline SVG in HTML5
            write_atomic(path, _page(schedule, svg), protected=tuple(protected))
            return
        fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
        write_atomic(path, buffer.getvalue(), protected=tuple(protected))
    finally:
        plt.close(fig)
