"""Fit the spot model's correlation and capacity wait per cloud from the shipped public spot traces.

    python tools/fit_spot.py

`catalogs/spot_trace_rates.csv` holds one row per public trace (Can't Be Late's
`skypilot-org/spot-traces`@221da1ab, and SkyNomad's GCP H100 probes, `andylizf/skynomad-artifact`@62b9aaa1) with
per-trace statistics, and `catalogs/spot_traces/` the multi-node traces themselves; see catalogs/README.md. Two
numbers per cloud come out (the cost model's §3):

- `spot_correlation` c: each event takes each node of the zone with a probability U that varies from event to
  event, so events come in every size; c is the share of the events taking one given node that also take any
  other given node. On a pool of M nodes the sizes of events (seen from all M up; a drop between two samples is
  one event) follow `candidate.event_sizes(M, c)`, and c is their maximum-likelihood fit. A job on n nodes then
  sees `spot_event_rate(λ, n, c)` = λ·g(n) events an hour, λ the node-loss rate while all its nodes are up.
- `spot_capacity_wait_h` m: the mean time from a preemption until spot capacity is there again (the
  0-runs after 1→0 in the traces of running instances; for GCP, which has only probes, the mean time
  no node could be had), pooled over zones by the number of preemptions.
- `spot_capacity_wait_cv`: the coefficient of variation of those waits, from the shipped traces' own down
  runs (AWS's 1-node runs, GCP's probes). The model gives the wait a two-phase hyperexponential law with
  that mean and spread (`candidate.wait_phases`).

It prints the fit and, per trace set, the statistics the fit must reproduce: the share of events by size, the
mean event size, and the rate of events that end the all-up state (measured against λ·g(M)).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from planner.economics.candidate import event_sizes as size_shares  # noqa: E402
from planner.economics.candidate import spot_event_rate

TABLE = Path(__file__).resolve().parents[1] / "catalogs" / "spot_trace_rates.csv"
TRACES = TABLE.parent / "spot_traces"
SETS = {
    "aws": "aws_*4node*",
    "gcp": "gcp_*16node*",
    "aws-16-node-probe": "aws_*16node*",
}
WAITS = {
    "aws": "aws_*1node*",
    "gcp": "gcp_*16node*",
    "aws-16-node-probe": "aws_*16node*",
}
"""The traces whose down runs (no node up, until one is back) give the waits' spread."""
"""The multi-node trace set each fit reads: AWS's preemption runs of 4 running nodes (the probes are the check
the fit did not use), GCP's 16 x H100 probes."""


def event_sizes(pattern: str) -> tuple[Counter, int, float]:
    """How many nodes each event takes, from the state where all of a trace's M nodes are up (a drop between two
    samples is one event), pooled over the shipped traces matching `pattern`; M; and the hours all M were up."""
    sizes, pool, hours = Counter(), 0, 0.0
    for path in sorted(TRACES.glob(pattern)):
        trace = json.loads(path.read_text())
        up, pool, step = (
            trace["data"],
            trace["metadata"]["nodes"],
            trace["metadata"]["gap_seconds"] / 3600,
        )
        sizes.update(a - b for a, b in zip(up, up[1:]) if a == pool and b < a)
        hours += step * sum(a == pool for a in up[:-1])
    return sizes, pool, hours


def down_runs(pattern: str) -> list[float]:
    """Hours from each loss of the last node until one is back, in the shipped traces matching `pattern`."""
    runs = []
    for path in sorted(TRACES.glob(pattern)):
        trace = json.loads(path.read_text())
        up, step = trace["data"], trace["metadata"]["gap_seconds"] / 3600
        starts = [i + 1 for i in range(len(up) - 1) if up[i] > 0 and up[i + 1] == 0]
        for start in starts:
            end = next((j for j in range(start, len(up)) if up[j] > 0), None)
            if (
                end is not None
            ):  # a run still down when the trace ends says nothing of its length
                # zeros seen: the midpoint of what the samples allow
                runs.append((end - start) * step)
    return runs


def correlation(sizes: Counter, pool: int) -> float:
    """c of maximum likelihood for the observed event sizes on a pool of `pool` nodes."""
    counts = np.array([sizes.get(k, 0) for k in range(1, pool + 1)], dtype=float)

    def minus_log_likelihood(c: float) -> float:
        return -float(np.dot(counts, np.log(np.maximum(size_shares(pool, c), 1e-300))))

    return float(
        minimize_scalar(
            minus_log_likelihood,
            bounds=(1e-4, 1 - 1e-6),
            method="bounded",
            options={"xatol": 1e-7},
        ).x
    )


def trace_statistics(pattern: str) -> dict:
    """What a multi-node trace set says and what a fitted c makes of it."""
    sizes, pool, hours = event_sizes(pattern)
    events = sum(sizes.values())
    c = correlation(sizes, pool)
    # node losses per node-hour, all up
    lam = sum(k * count for k, count in sizes.items()) / (pool * hours)
    return {
        "spot_correlation": c,
        "nodes": pool,
        "events": events,
        "lam": lam,
        "rate_all": events / hours,
        "model_rate_all": spot_event_rate(lam, pool, c),
        "shares": np.array([sizes.get(k, 0) / events for k in range(1, pool + 1)]),
        "model_shares": size_shares(pool, c),
    }


def wait(rows: pd.DataFrame) -> float:
    """Mean hours without capacity after a preemption, pooled by preemptions."""
    rows = rows[rows["preemptions"] > 0]
    return float(
        (rows["mean_down_h"] * rows["preemptions"]).sum() / rows["preemptions"].sum()
    )


def fit(table: pd.DataFrame) -> dict[str, dict]:
    """Per cloud (and the AWS probe set the fit does not use): c and the trace statistics, and m."""
    gpu = table[table["gpu"] != "none"]
    aws_runs = gpu[(gpu["cloud"] == "aws") & (gpu["kind"] == "preemption_run")]
    waits = {
        "aws": wait(aws_runs[aws_runs["nodes"] == 1]),
        "gcp": wait(gpu[(gpu["cloud"] == "gcp") & (gpu["signal"] == "any")]),
        "aws-16-node-probe": wait(
            gpu[(gpu["cloud"] == "aws") & (gpu["signal"] == "all16")]
        ),
    }
    spread = {
        name: np.std(runs) / np.mean(runs)
        for name, runs in ((n, down_runs(p)) for n, p in WAITS.items())
    }
    return {
        name: {
            **trace_statistics(pattern),
            "spot_capacity_wait_h": waits[name],
            "spot_capacity_wait_cv": float(spread[name]),
            "trace": pattern,
        }
        for name, pattern in SETS.items()
    }


def main() -> None:
    for name, f in fit(pd.read_csv(TABLE)).items():
        shares = " ".join(f"{x:.2f}" for x in f["shares"])
        model = " ".join(f"{x:.2f}" for x in f["model_shares"])
        sizes = np.arange(1, f["nodes"] + 1)
        distance = 0.5 * np.abs(f["shares"] - f["model_shares"]).sum()
        gangs = ", ".join(
            f"g({n}) {spot_event_rate(1.0, n, f['spot_correlation']):.2f}"
            for n in (1, 2, 4, 8, 16)
        )
        print(
            f"{name}: c = {f['spot_correlation']:.3f}, m = {f['spot_capacity_wait_h']:.2f} h, "
            f"wait cv = {f['spot_capacity_wait_cv']:.2f} "
            f"({f['events']} events on {f['nodes']} nodes, {f['trace']})\n"
            f"  events by size, measured: {shares}\n  events by size, model:    {model}  "
            f"(total variation {distance:.3f})\n"
            f"  mean size {np.dot(sizes, f['shares']):.2f} measured, {np.dot(sizes, f['model_shares']):.2f} model; "
            f"all-{f['nodes']}-up state ends {f['rate_all']:.3f}/h measured, {f['model_rate_all']:.3f}/h model "
            f"at λ = {f['lam']:.3f} node losses per node-hour while all are up "
            f"({f['nodes'] * f['lam']:.3f}/h if independent); {gangs}"
        )


if __name__ == "__main__":
    main()
