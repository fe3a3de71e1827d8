"""Fit the spot model's correlation and capacity wait per cloud from `catalogs/spot_trace_rates.csv`.

    python tools/fit_spot.py

The table holds one row per public trace (Can't Be Late's `skypilot-org/spot-traces`@221da1ab, and
SkyNomad's GCP H100 probes, `andylizf/skynomad-artifact`@62b9aaa1), with per-trace statistics; see
catalogs/README.md. Two numbers per cloud come out (the cost model's §3):

- `spot_correlation` c: a node is preempted at λ per node-hour, a share c of that in events that take every
  node of a job at once. A job on n nodes then sees events at λ·(c + n(1 − c)); a multi-node trace gives λ
  (node losses per node-up-hour) and that event rate (ends of the all-n-up state per hour in it), so
  c = (n − rate_all / λ) / (n − 1), pooled over the trace's zones.
- `spot_capacity_wait_h` m: the mean time from a preemption until spot capacity is there again (the
  0-runs after 1→0 in the traces of running instances; for GCP, which has only probes, the mean time
  no node could be had), pooled over zones by the number of preemptions.

It prints the fit, what independence would have predicted, and the rows the shipped providers.csv uses;
then, from the shipped traces themselves (`catalogs/spot_traces/`), how many nodes each event takes, which the
model does not use yet (it has each event take one node or all of them): with a size distribution q_k fitted on
a pool of M nodes, a gang of n of them sees g(n)·λ events an hour, g(n) = M/E[K] · Σ_k q_k (1 − C(M−n, k)/C(M, k))
(hypergeometric: an event of k of the M nodes misses the gang's n with that probability), g(1) = 1, g(M) = M/E[K].
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd

TABLE = Path(__file__).resolve().parents[1] / "catalogs" / "spot_trace_rates.csv"
TRACES = TABLE.parent / "spot_traces"


def correlation(rows: pd.DataFrame) -> tuple[float, float, float, int]:
    """(c, pooled node-loss rate, pooled all-n event rate, n) over the all-n rows of one trace set."""
    n = int(rows["nodes"].iloc[0])
    lam = rows["node_losses"].sum() / rows["node_up_hours"].sum()
    rate_all = rows["preemptions"].sum() / rows["up_hours"].sum()
    return min(1.0, max(0.0, (n - rate_all / lam) / (n - 1))), lam, rate_all, n


def wait(rows: pd.DataFrame) -> float:
    """Mean hours without capacity after a preemption, pooled by preemptions."""
    rows = rows[rows["preemptions"] > 0]
    return float((rows["mean_down_h"] * rows["preemptions"]).sum() / rows["preemptions"].sum())


def fit(table: pd.DataFrame) -> dict[str, dict]:
    gpu = table[table["gpu"] != "none"]
    out = {}
    aws_runs = gpu[(gpu["cloud"] == "aws") & (gpu["kind"] == "preemption_run")]
    c, lam, rate_all, n = correlation(aws_runs[aws_runs["signal"] == "all4"])
    out["aws"] = {"spot_correlation": c, "spot_capacity_wait_h": wait(aws_runs[aws_runs["nodes"] == 1]),
                  "lam": lam, "rate_all": rate_all, "nodes": n,
                  "trace": "preemption/4-node/aws-08-03-2023 (c); preemption/1-node/aws-04-22-2023 (m)"}
    gcp = gpu[gpu["cloud"] == "gcp"]
    c, lam, rate_all, n = correlation(gcp[gcp["signal"] == "all16"])
    out["gcp"] = {"spot_correlation": c, "spot_capacity_wait_h": wait(gcp[gcp["signal"] == "any"]),
                  "lam": lam, "rate_all": rate_all, "nodes": n,
                  "trace": "skynomad gcp_h100_a3-highgpu-1g_probe16_2025-10 (c and m)"}
    probes = gpu[(gpu["cloud"] == "aws") & (gpu["signal"] == "all16")]
    c16, lam16, rate16, _ = correlation(probes)
    out["aws-16-node-probe"] = {"spot_correlation": c16, "spot_capacity_wait_h": wait(probes), "lam": lam16,
                                "rate_all": rate16, "nodes": 16, "trace": "availability/16-node/aws-08-27-2023"}
    return out


def event_sizes(pattern: str) -> tuple[Counter, int, float]:
    """How many nodes each event takes, from the state where all of a trace's M nodes are up (a drop between two
    samples is one event), pooled over the shipped traces matching `pattern`; M; and the hours all M were up."""
    sizes, pool, hours = Counter(), 0, 0.0
    for path in sorted(TRACES.glob(pattern)):
        trace = json.loads(path.read_text())
        up, pool, step = trace["data"], trace["metadata"]["nodes"], trace["metadata"]["gap_seconds"] / 3600
        sizes.update(a - b for a, b in zip(up, up[1:]) if a == pool and b < a)
        hours += step * sum(a == pool for a in up[:-1])
    return sizes, pool, hours


def gang_events(sizes: Counter, pool: int, n: int) -> float:
    """g(n): events a gang of n of the pool's nodes sees, per node-loss rate λ (see the module's docstring)."""
    total = sum(sizes.values())
    mean = sum(k * count for k, count in sizes.items()) / total
    return pool / mean * sum(count / total * (1 - math.comb(pool - n, k) / math.comb(pool, k))
                             for k, count in sizes.items())


def main() -> None:
    table = pd.read_csv(TABLE)
    fitted = fit(table)
    for cloud, f in fitted.items():
        independent = f["lam"] * f["nodes"]
        print(f"{cloud:18s} c = {f['spot_correlation']:.3f}   m = {f['spot_capacity_wait_h']:.2f} h   "
              f"({f['nodes']}-node events {f['rate_all']:.3f}/h against {independent:.3f}/h if independent, "
              f"ratio {f['rate_all'] / independent:.2f}; {f['trace']})")
    print("\nnodes per event, from all up (not yet in the model), g(n) = events a gang of n sees per λ with λ the\n"
          "node-loss rate while all are up, and that λ beside the rate over all states (the fit's):")
    for name, pattern, pooled in (("aws 16-node probes", "aws_*16node*", "aws-16-node-probe"),
                                  ("aws 4-node runs", "aws_*4node*", "aws"), ("gcp 16-node probes", "gcp_*16node*", "gcp")):
        sizes, pool, hours = event_sizes(pattern)
        shares = ", ".join(f"{k}: {sizes[k] / sum(sizes.values()):.2f}" for k in sorted(sizes))
        gangs = ", ".join(f"g({n}) {gang_events(sizes, pool, n):.2f}" for n in (1, 2, 4, 8, 16) if n <= pool)
        all_up = sum(k * count for k, count in sizes.items()) / (pool * hours)
        print(f"{name:18s} {sum(sizes.values())} events; share by size {{{shares}}}; {gangs}; node losses per "
              f"node-hour {all_up:.3f} all up, {fitted[pooled]['lam']:.3f} over all states")


if __name__ == "__main__":
    main()
