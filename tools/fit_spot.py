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

It prints the fit, what independence would have predicted, and the rows the shipped providers.csv uses.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

TABLE = Path(__file__).resolve().parents[1] / "catalogs" / "spot_trace_rates.csv"


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


def main() -> None:
    table = pd.read_csv(TABLE)
    for cloud, f in fit(table).items():
        independent = f["lam"] * f["nodes"]
        print(f"{cloud:18s} c = {f['spot_correlation']:.3f}   m = {f['spot_capacity_wait_h']:.2f} h   "
              f"({f['nodes']}-node events {f['rate_all']:.3f}/h against {independent:.3f}/h if independent, "
              f"ratio {f['rate_all'] / independent:.2f}; {f['trace']})")


if __name__ == "__main__":
    main()
