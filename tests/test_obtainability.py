"""How many spot nodes of an offer family can be held at once (economics/obtainability.py, `planner catalog
spot`), checked on traces small enough to count by hand and on the shipped probes against what the issue
measured by hand (a 16-node probe all up about 46 % of the time)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.economics.obtainability import _runs, obtainability
from planner.load.traces import Trace, load_traces


def _trace(name: str, up: list[int], nodes: int = 4, cloud: str = "aws") -> Trace:
    return Trace(name, 0.5, np.array(up), cloud, "x1", nodes)


def test_holds_and_waits_are_counted_between_the_trace_s_ends():
    # cut runs at both ends are left out
    up = np.array([1, 1, 0, 0, 0, 1, 1, 1, 0, 1], dtype=bool)
    assert _runs(up, 0.5) == ([1.5], [1.5, 0.5])
    assert _runs(np.ones(4, dtype=bool), 0.5) == (
        [2.0],
        [],
    )  # never lost: one hold as long as the trace
    assert _runs(np.zeros(4, dtype=bool), 0.5) == ([], [])


def test_all_n_up_by_hand():
    a = _trace("a", [4, 4, 2, 4, 4, 4, 1, 4])
    b = _trace("b", [4, 3, 3, 3, 3, 3, 3, 4])
    # a one-node probe says nothing of gangs
    single = _trace("c", [1, 0, 1, 1], nodes=1)
    rows = {r.nodes: r for r in obtainability([a, b, single], sizes=(1, 2, 4, 8))}
    assert sorted(rows) == [1, 2, 4]  # nothing measured eight
    assert rows[1].probes == 3 and rows[4].probes == 2
    assert rows[4].p_all_up == pytest.approx((6 / 8 + 2 / 8) / 2)
    assert (rows[4].p_all_up_worst, rows[4].p_all_up_best) == (2 / 8, 6 / 8)
    # a's middle run of three ticks; the others touch an end
    assert rows[4].hold_h == pytest.approx(1.5)
    # a's two drops and b's long one
    assert rows[4].wait_h == pytest.approx((0.5 + 0.5 + 3.0) / 3)
    assert rows[2].p_all_up == pytest.approx((7 / 8 + 1) / 2)


def test_sixteen_shipped_nodes_are_all_up_under_half_the_time():
    rows = obtainability(tuple(load_traces()))
    sixteen = [r for r in rows if r.nodes == 16]
    assert {r.cloud for r in sixteen} == {"aws", "gcp"}
    for r in sixteen:
        assert (
            0.35 < r.p_all_up < 0.5 and r.p_all_up_worst < r.p_all_up <= r.p_all_up_best
        )
    for cloud in (
        "aws",
        "gcp",
    ):  # the more nodes a gang needs, the less often it has them all
        shares = [r.p_all_up for r in rows if r.cloud == cloud]
        assert shares == sorted(shares, reverse=True)
    # no probe held 32: such a gang is not planned
    assert not any(r.nodes == 32 for r in rows)


def test_catalog_spot_command(run, tmp_path):
    table = run("catalog", "spot", "--provider", "gcp")
    assert (
        table.exit_code == 0
        and "a3-highgpu-1g" in table.stdout
        and "p3.2xlarge" not in table.stdout
    )
    data = json.loads(run("catalog", "spot", "--format", "json").stdout)
    assert {r["nodes"] for r in data} == {1, 2, 4, 8, 16}
    missing = run("catalog", "spot", "--traces", tmp_path / "none")
    assert missing.exit_code == 2 and "no such folder of spot traces" in missing.stderr
