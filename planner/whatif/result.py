"""What a sweep reports: its result (every point, every switch), one row per point, each workload's placement
over the stretches between its switches, and the text `planner whatif` prints.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.whatif.points import PointResult, changed
from planner.whatif.spec import PARAMETERS, SHORT, SweepSpec


@dataclass
class SweepResult:
    spec: SweepSpec
    points: list[PointResult]
    switches: list[dict]
    seconds: float = 0.0
    solves: int = 0

    def record(self) -> dict:
        """The JSON contract: points and switches (plus what was swept and how finely)."""
        return {
            "scenario": self.spec.source,
            "swept": self.spec.swept,
            "where": dict(self.spec.where),
            "precision": self.spec.precision,
            "points": [p.record() for p in self.points],
            "switches": [
                {
                    k: s[k]
                    for k in ("workload", "parameter", "at", "within", "from", "to")
                }
                | {p: s[p] for p in PARAMETERS}
                for s in self.switches
            ],
        }


def point_rows(result: SweepResult) -> list[dict]:
    """One row per grid point: the swept multipliers, status, objective and spot share of spending."""
    # one point: the parameters given (a single --rate point was labelled and valued as the spot price)
    swept = (
        result.spec.swept
        or [p for p in PARAMETERS if p in result.spec.axes]
        or [PARAMETERS[0]]
    )
    rows = []
    previous = None
    for point in result.points:
        spend = sum(point.spend_usd.values())
        row = {SHORT[p]: point.multipliers[p] for p in swept}
        row |= {
            "status": point.status,
            "objective_usd": point.objective_usd,
            "spot_share": (point.spend_usd.get("spot", 0.0) / spend)
            if spend > 0
            else None,
        }
        if len(swept) == 1:
            row["moved"] = (
                ", ".join(changed(previous, point, parameter=swept[0]))
                if previous
                else ""
            )
        rows.append(row)
        previous = point
    return rows


def segments(result: SweepResult) -> list[dict]:
    """For a one-parameter sweep: each workload's placement over each stretch between its switches."""
    if len(result.spec.swept) != 1:
        return []
    parameter = result.spec.swept[0]
    values = result.spec.axes[parameter]
    names = [w for w in dict.fromkeys(w for p in result.points for w in p.placements)]
    rows = []
    for name in names:
        switches = sorted(
            (s for s in result.switches if s["workload"] == name), key=lambda s: s["at"]
        )
        edges = [values[0], *(s["at"] for s in switches), values[-1]]
        held = [s["held_from"] for s in switches] + [
            switches[-1]["held_to"]
            if switches
            else result.points[0].held(name, parameter)
        ]
        for lo, hi, where in zip(edges, edges[1:], held):
            rows.append(
                {"workload": name, "from_x": lo, "to_x": hi, "placement": where or "-"}
            )
    return rows


def sweep_text(result: SweepResult, fmt: str) -> str:
    import pandas as pd

    from planner.report.render import render_table, to_csv, to_json

    if fmt == "json":
        return to_json(result.record())
    if fmt == "csv":
        names = list(dict.fromkeys(w for p in result.points for w in p.placements))
        frame = pd.DataFrame(
            [
                {
                    **p.multipliers,
                    "status": p.status,
                    "objective_usd": p.objective_usd,
                    **{w: p.placements.get(w, "") for w in names},
                }
                for p in result.points
            ]
        )
        return to_csv(frame)
    spec = result.spec
    label = (
        ", ".join(
            f"{SHORT[p]} x{spec.axes[p][0]:g}..{spec.axes[p][-1]:g} ({len(spec.axes[p])} points)"
            for p in spec.swept
        )
        or "one point"
    )
    fixed = ", ".join(
        f"{SHORT[p]} x{spec.axes[p][0]:g}"
        for p in PARAMETERS
        if p not in spec.swept and spec.axes.get(p, (1.0,))[0] != 1.0
    )
    where = ", ".join(f"{k}={v}" for k, v in spec.where) or "all offers"
    title = f"what-if sweep: {label}{'; ' + fixed if fixed else ''}; multipliers apply to {where}"
    parts = [title, render_table(pd.DataFrame(point_rows(result)), fold=("moved",))]
    if result.switches:
        coarse = any(
            s["within"] > spec.precision / 2 * (1 + 1e-9) for s in result.switches
        )
        frame = pd.DataFrame(
            [
                {
                    "workload": s["workload"],
                    "parameter": SHORT[s["parameter"]],
                    "at": s["at"],
                    **({"within": f"±{s['within']:g}"} if coarse else {}),
                    **{SHORT[p]: s[p] for p in spec.swept if p != s["parameter"]},
                    "from": s["from"] or "-",
                    "to": s["to"] or "-",
                }
                for s in result.switches
            ]
        )
        heading = f"switch points (bisected to ±{spec.precision / 2:g}" + (
            " between proven points; no finer where the time limit left a point unproven)"
            if coarse
            else ")"
        )
        # endpoints' pools run long
        parts.append(render_table(frame, title=heading, fold=("from", "to")))
    else:
        parts.append("no placement changes between grid points\n")
    if segments(result):
        parts.append(
            render_table(
                pd.DataFrame(segments(result)),
                title="placements between switch points",
                fold=("placement",),
            )
        )
    parts.append(
        f"{len(result.points)} points, {result.solves} solves (with bisection), {result.seconds:.1f} s\n"
    )
    return "\n".join(p.rstrip("\n") + "\n" for p in parts)
