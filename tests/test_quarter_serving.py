"""Endpoints in quarter files (`kind: serving` runs from release to due) under `planner batch`.

The optimum is checked against a brute force that places the run at every candidate and start and
prices the endpoint alone with `planner solve` under what the run leaves of the quota (the solve
model's endpoints are themselves checked against brute force in test_serving.py); every schedule
passes the independent checker, which is shown to catch tampered endpoints; bad input is one line.
"""

from __future__ import annotations

import copy
import functools
import json
import textwrap

import pytest
from click.testing import CliRunner

from planner.batch.checker import check_schedule
from planner.batch.contract import batch_json
from planner.batch.pipeline import make_batch_plan
from planner.cli import main
from planner.load.quarter import load_quarter
from planner.load.scenario import load_scenario
from planner.solve.pipeline import make_plan

ENDPOINT = """\
  - name: chat
    kind: serving
    model: llama-3.1-8b
    traffic: {requests_per_s: RATE, buckets: [{prompt_tokens: 1024, output_tokens: 256}]}
    slo: {ttft: 800ms, tpot: 40ms}
    availability: 0.999
    allow: {gpus: [H100], regions: [us-east-1], instance_types: [p5.4xlarge]}
    release: 2027-01-05T12:00
    due: 2027-01-07
"""
TUNE = """\
  - name: tune
    kind: fine_tuning
    model: llama-3.1-8b
    method: lora
    work: {tokens: 3e8}
    allow: {gpus: [H100], regions: [us-east-1]}
    release: RELEASE
    due: DUE
"""
INSIDE = (
    "2027-01-05T12:00",
    "2027-01-07",
)  # the tune's window inside the endpoint's: they always overlap


def quarter(
    rate: float = 40,
    quota: int = 8,
    due: str = "2027-01-08",
    extra: str = "",
    release: str = "2027-01-04",
) -> str:
    return (
        textwrap.dedent("""\
        name: endpoint-quarter
        catalogs: [aws]
        defaults: {spot_evidence: fitted}  # cases built on the fitted process's candidates
        horizon: {start: 2027-01-04, end: 2027-01-08, step: 12h}
        runs:
        """)
        + ENDPOINT.replace("RATE", str(rate))
        + TUNE.replace("DUE", due).replace("RELEASE", release)
        + extra
        + (f"constraints:\n  gpu_quotas: {{aws/H100: {quota}}}\n" if quota else "")
    )


def solved(tmp_path, text: str, name: str = "quarter.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    loaded = load_quarter(path)
    plan = make_batch_plan(loaded, time_limit_s=30.0, workers=1)
    return (
        loaded,
        plan,
        json.loads(json.dumps(batch_json(plan), default=lambda v: v.item())),
    )


@functools.cache
def endpoint_alone_usd(
    directory: str, rate: float, quota: int | None, hours: float
) -> float | None:
    """The endpoint alone, as `planner solve` plans it, for `hours` under a quota of `quota` H100s."""
    body = ENDPOINT.replace("RATE", str(rate)).replace(
        "    release: 2027-01-05T12:00\n    due: 2027-01-07\n",
        f"    duration: {hours:g}h\n",
    )
    text = (
        "name: alone\ncatalogs: [aws]\nworkloads:\n"
        + body
        + (
            f"constraints:\n  gpu_quotas: {{aws/H100: {quota}}}\n"
            if quota is not None
            else ""
        )
    )
    path = f"{directory}/alone-{rate}-{quota}-{hours}.yaml"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    plan = make_plan(load_scenario(path), time_limit_s=30.0, workers=1)
    return (
        plan.result.objective_usd
        if plan.result is not None and plan.result.solved
        else None
    )


def brute_force(loaded, plan, rate: float, quota: int, directory: str) -> float:
    """min over the run's candidates and starts of its cost plus the endpoint alone under the quota the run
    leaves while they overlap (all of it when they do not)."""
    window = plan.endpoints.windows["chat"]
    hours = 36.0  # 2027-01-05T12:00 to 2027-01-07
    run = next(r for r in loaded.quarter.runs if r.name == "tune")
    release, due = loaded.window(run)
    best = float("inf")
    for c in plan.cands.itertuples(index=False):
        if c.provider == "aws" and c.gpus > quota:
            continue  # over the quota even alone
        for start in range(release, due - int(c.duration_steps) + 1):
            overlaps = start < window[1] and window[0] < start + int(c.duration_steps)
            left = quota - int(c.gpus) if overlaps and c.provider == "aws" else quota
            if left <= 0:
                continue  # nothing left for the endpoint
            alone = endpoint_alone_usd(directory, rate, left, hours)
            if alone is not None:
                best = min(best, float(c.cost_usd) + alone)
    return best


@pytest.mark.parametrize(
    "rate,quota,window,binds",
    [
        (
            40,
            8,
            ("2027-01-04", "2027-01-08"),
            False,
        ),  # the tune runs before the endpoint starts
        (40, 8, INSIDE, True),  # beside the endpoint's 3 GPUs: on 5 or fewer
        (70, 9, INSIDE, True),
        (
            70,
            6,
            ("2027-01-04", "2027-01-06"),
            True,
        ),  # it must end by the 6th: before the endpoint, or beside it
    ],
)
def test_quarter_endpoint_matches_brute_force(tmp_path, rate, quota, window, binds):
    release, due = window
    loaded, plan, data = solved(tmp_path, quarter(rate, quota, due, release=release))
    assert data["status"] == "OPTIMAL"
    want = brute_force(loaded, plan, rate, quota, str(tmp_path))
    free = brute_force(loaded, plan, rate, 10_000, str(tmp_path))
    print(
        f"rate {rate}, quota {quota}, tune {release}..{due}: batch ${data['objective_usd']:.2f}, "
        f"brute force ${want:.2f} (${free:.2f} without the quota)"
    )
    assert data["objective_usd"] == pytest.approx(want, abs=0.02)
    assert (
        want > free + 0.01
    ) == binds  # the case tests the shared quota only where it costs something
    assert data["bound_usd"] <= data["objective_usd"] + 1e-9
    assert check_schedule(loaded, data) == []


def test_quota_pushes_the_run_out_of_the_endpoints_window(tmp_path):
    """With 8 H100s and an endpoint that needs most of them, the fine-tune runs before the endpoint starts
    (or beside it on the few GPUs left), never over the quota at any hour."""
    loaded, plan, data = solved(tmp_path, quarter(40, 8))
    tune = next(r for r in data["runs"] if r["run"] == "tune")
    endpoint = data["endpoints"][0]
    held = max(
        sum(p["nodes"] for p in period["pools"]) for period in endpoint["periods"]
    )
    overlaps = tune["start"] < endpoint["end"] and endpoint["start"] < tune["end"]
    assert not overlaps or held + tune["gpus"] <= 8
    assert endpoint["start"].startswith("2027-01-05T12:00") and endpoint[
        "end"
    ].startswith("2027-01-07T00:00")
    assert endpoint["duration_h"] == pytest.approx(36.0)


RESERVATION = """\
reservations:
  - {name: node, offer: aws/us-east-1/p5.48xlarge, start: 2027-01-05, end: 2027-01-07, price_per_node_h: PRICE,
     max_nodes: 1}
"""


def endpoint_on_any_h100(text: str) -> str:
    return text.replace(
        "instance_types: [p5.4xlarge]", "instance_types: [p5.4xlarge, p5.48xlarge]"
    )


@pytest.mark.parametrize("price,bought", [(5.0, 1), (500.0, 0)])
def test_reservation_carries_the_endpoint_when_it_pays(tmp_path, price, bought):
    text = endpoint_on_any_h100(
        quarter(40, 16, extra=RESERVATION.replace("PRICE", str(price)))
    )
    loaded, plan, data = solved(tmp_path, text)
    assert data["status"] == "OPTIMAL"
    assert data["reservations"][0]["nodes"] == bought
    markets = {
        p["market"]
        for period in data["endpoints"][0]["periods"]
        for p in period["pools"]
    }
    assert ("reserved" in markets) == bool(bought)
    if bought:  # the node is prepaid: the endpoint then costs nothing more
        assert data["endpoints"][0]["cost_usd"] == pytest.approx(0.0)
        assert all(
            p["reservation"] == "node"
            for period in data["endpoints"][0]["periods"]
            for p in period["pools"]
            if p["market"] == "reserved"
        )
        assert data["reservations"][0]["utilisation"] > 0
    assert check_schedule(loaded, data) == []


def test_months_spread_the_endpoint_and_sum_to_the_total(tmp_path):
    text = (
        quarter(40, 8)
        .replace("end: 2027-01-08", "end: 2027-02-08")
        .replace("due: 2027-01-07", "due: 2027-02-03")
    )
    loaded, plan, data = solved(tmp_path, text)
    months = {m["month"]: m["cost_usd"] for m in data["months"]}
    endpoint = data["endpoints"][0]
    assert sum(months.values()) == pytest.approx(data["objective_usd"], abs=0.02)
    february = 2 / 28.5  # of 2027-01-05T12:00 to 2027-02-03
    assert months["2027-02"] == pytest.approx(endpoint["cost_usd"] * february, abs=0.02)
    assert check_schedule(loaded, data) == []


# ---------------------------------------------------------------- the checker catches a tampered endpoint


@pytest.fixture(scope="module")
def launch():
    loaded = load_quarter("scenarios/quarter-launch.yaml")
    plan = make_batch_plan(loaded, time_limit_s=30.0, workers=1)
    return loaded, json.loads(json.dumps(batch_json(plan), default=lambda v: v.item()))


def tampered(data: dict, change) -> dict:
    data = copy.deepcopy(data)
    change(data)
    return data


def test_shipped_launch_quarter_passes_the_checker(launch):
    loaded, data = launch
    assert data["status"] == "OPTIMAL" and check_schedule(loaded, data) == []
    assert {
        p["market"]
        for period in data["endpoints"][0]["periods"]
        for p in period["pools"]
    } == {"reserved"}


def test_checker_catches_an_endpoint_over_its_reservation(launch):
    loaded, data = launch

    def more(d):
        d["endpoints"][0]["periods"][1]["pools"][0]["nodes"] = 2

    assert any(
        "reservation" in v and "bought" in v
        for v in check_schedule(loaded, tampered(data, more))
    )


def test_checker_catches_an_endpoint_over_the_quota(launch):
    loaded, data = launch

    def beside(d):  # the 70B fine-tune on 16 more GPUs next to the endpoint's 8
        run = next(r for r in d["runs"] if r["run"] == "next-release-sft")
        run.update(nodes=2, gpus=16)

    assert any(
        v.startswith("quota aws/H100") and "assistant" in v
        for v in check_schedule(loaded, tampered(data, beside))
    )


def test_checker_catches_a_short_window_and_a_wrong_cost(launch):
    loaded, data = launch

    def short(d):
        d["endpoints"][0]["start"] = "2027-02-02T00:00:00+00:00"

    assert any(
        "not its window" in v for v in check_schedule(loaded, tampered(data, short))
    )

    def cheaper(d):
        d["endpoints"][0]["cost_usd"] -= 100

    assert any(
        v.startswith("objective_usd")
        for v in check_schedule(loaded, tampered(data, cheaper))
    )

    def unrouted(d):
        d["endpoints"][0]["periods"][1]["pools"][0]["share_of_requests"] = [0.5]

    assert any(
        "routed 0.5000" in v for v in check_schedule(loaded, tampered(data, unrouted))
    )


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda t: t.replace(
                "    due: 2027-01-07\n", "    due: 2027-01-07\n    duration: 7d\n", 1
            ),
            "drop `duration`",
        ),
        (
            lambda t: t.replace(
                "    due: 2027-01-07\n", "    due: 2027-01-07\n    after: [tune]\n", 1
            ),
            "cannot wait `after` runs",
        ),
        (
            lambda t: t.replace(
                "    due: 2027-01-07\n", "    due: 2027-01-07\n    required: false\n", 1
            ),
            "always served",
        ),
        (
            lambda t: t.replace(
                "    due: 2027-01-08\n", "    due: 2027-01-08\n    after: [chat]\n"
            ),
            "is an endpoint",
        ),
        (
            lambda t: t.replace("    due: 2027-01-07\n", "    due: 2027-01-09\n", 1),
            "inside the horizon",
        ),
    ],
)
def test_bad_endpoint_runs_get_one_located_line(tmp_path, change, message):
    path = tmp_path / "bad.yaml"
    path.write_text(change(quarter()), encoding="utf-8")
    result = CliRunner().invoke(main, ["batch", str(path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "bad.yaml:" in lines[0], (
        result.output
    )


def test_gantt_draws_the_endpoint_on_its_reservation(launch):
    from planner.report.gantt import build_lanes

    _, data = launch
    lanes = build_lanes(data)
    reserved = next(
        lane for lane in lanes if lane.key == ("aws", "us-east-1", "p5.48xlarge")
    )
    bars = [
        bar for row in reserved.rows for bar in row if bar["market"] == "reserved"
    ]  # spot runs share the lane
    assert [
        (b["run"], b["market"], b["nodes"], b["start"][:10], b["end"][:10])
        for b in bars
    ] == [("assistant (endpoint)", "reserved", 1, "2027-02-01", "2027-03-01")]


def test_weekly_endpoint_in_a_quarter_passes_the_checker_hour_by_hour(tmp_path):
    """The checker walks the quarter's real dates: each hour's pools are those of its weekday's period."""
    weekly = (
        "traffic:\n      profile:\n"
        '        - {days: mon-fri, hours: "0-24", requests_per_s: 60}\n'
        '        - {days: sat-sun, hours: "0-24", requests_per_s: 10}\n'
        "      buckets:"
    )
    text = (
        quarter(40, 16)
        .replace("traffic: {requests_per_s: 40, buckets:", weekly)
        .replace("output_tokens: 256}]}", "output_tokens: 256}]")
        .replace(
            "    availability: 0.999\n",
            "    availability: 0.999\n    autoscale: true\n",
        )
    )
    text = text.replace("end: 2027-01-08,", "end: 2027-01-12,").replace(
        "due: 2027-01-07", "due: 2027-01-11"
    )
    assert "due: 2027-01-11" in text  # Tuesday to Monday: over a weekend
    loaded, plan, data = solved(tmp_path, text)
    assert data["status"] == "OPTIMAL"
    assert [p["days"] for p in data["endpoints"][0]["periods"]] == [
        "mon-fri",
        "sat-sun",
    ]
    assert check_schedule(loaded, data) == []
    nodes = [
        sum(p["nodes"] for p in period["pools"])
        for period in data["endpoints"][0]["periods"]
    ]
    assert nodes[0] > nodes[1]


def test_a_quarter_of_endpoints_only_is_planned(tmp_path):
    """No batch runs: the endpoints are the whole plan (it was INFEASIBLE with no reason)."""
    text = textwrap.dedent("""\
        name: endpoints-only
        catalogs: [aws]
        horizon: {start: 2027-01-04, end: 2027-01-08, step: 12h}
        runs:
        """) + ENDPOINT.replace("RATE", "40")
    loaded, plan, data = solved(tmp_path, text)
    assert data["status"] == "OPTIMAL" and plan.infeasible == {}
    assert data["objective_usd"] == pytest.approx(
        endpoint_alone_usd(str(tmp_path), 40, None, 36), abs=0.02
    )
    assert check_schedule(loaded, data) == []
    result = CliRunner().invoke(
        main, ["batch", str(tmp_path / "quarter.yaml")], catch_exceptions=False
    )
    assert result.exit_code == 0 and "OPTIMAL" in result.stdout, result.output
