"""Weekly traffic profiles: periods with `days: mon-fri` (or `sat-sun`, `mon,wed`, ...).

A period applies on its weekdays only, so an autoscaled node added for it is billed on those days, the
share of time below capacity weights it by its days, the checker sums limits per weekday and hour, and
the replay walks the week (day 0 a Monday).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from planner.candidates.pool_availability import below_capacity
from planner.cli import main
from planner.economics.endpoint_sim import PeriodPlan, Pool, replay
from planner.load.scenario import load_scenario
from planner.solve.checker import check_plan


def scenario(profile: str, autoscale: bool = True, quota: str = "") -> str:
    return (
        textwrap.dedent("""\
        name: weekly
        catalogs: [aws]
        workloads:
          - name: chat
            kind: serving
            model: llama-3.1-8b
            traffic:
              profile:
        PROFILE
              buckets: [{prompt_tokens: 1024, output_tokens: 256}]
            slo: {ttft: 800ms, tpot: 40ms}
            availability: 0.999
            autoscale: AUTOSCALE
            allow: {gpus: [H100], regions: [us-east-1, us-east-2]}
            duration: 28d
        """)
        .replace("PROFILE", textwrap.indent(textwrap.dedent(profile), " " * 8))
        .replace("AUTOSCALE", "true" if autoscale else "false")
        + quota
    )


WEEKLY = """\
    - {days: mon-fri, hours: "0-8", requests_per_s: 10}
    - {days: mon-fri, hours: "8-20", requests_per_s: 60}
    - {days: mon-fri, hours: "20-24", requests_per_s: 20}
    - {days: sat-sun, hours: "0-24", requests_per_s: 10}
"""
DAILY_AT_WEEKDAY_RATES = """\
    - {hours: "0-8", requests_per_s: 10}
    - {hours: "8-20", requests_per_s: 60}
    - {hours: "20-24", requests_per_s: 20}
"""


def planned(tmp_path, text: str, name: str = "s.yaml") -> tuple:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    out = tmp_path / (name + ".json")
    result = CliRunner().invoke(
        main, ["solve", str(path), "--format", "json", "--no-timings", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return load_scenario(path), json.loads(out.read_text())


def test_identical_days_cost_what_the_daily_profile_costs(tmp_path):
    """The same rates written per day-set (mon-fri and sat-sun) or daily are the same endpoint."""
    split = DAILY_AT_WEEKDAY_RATES.replace(
        "{hours", "{days: mon-fri, hours"
    ) + DAILY_AT_WEEKDAY_RATES.replace("{hours", "{days: sat-sun, hours")
    _, daily = planned(tmp_path, scenario(DAILY_AT_WEEKDAY_RATES), "daily.yaml")
    _, weekly = planned(tmp_path, scenario(split), "split.yaml")
    print(
        f"daily ${daily['objective_usd']:.2f}, written per day-set ${weekly['objective_usd']:.2f}"
    )
    assert weekly["objective_usd"] == pytest.approx(daily["objective_usd"], abs=0.05)
    assert [p["days"] for p in weekly["endpoints"][0]["periods"]] == ["mon-fri"] * 3 + [
        "sat-sun"
    ] * 3


def test_quiet_weekends_cost_less_only_with_autoscale(tmp_path):
    _, daily = planned(tmp_path, scenario(DAILY_AT_WEEKDAY_RATES), "daily.yaml")
    loaded, weekly = planned(tmp_path, scenario(WEEKLY), "weekly.yaml")
    _, fixed = planned(tmp_path, scenario(WEEKLY, autoscale=False), "fixed.yaml")
    _, fixed_daily = planned(
        tmp_path, scenario(DAILY_AT_WEEKDAY_RATES, autoscale=False), "fixed-daily.yaml"
    )
    print(
        f"weekday rates every day ${daily['objective_usd']:.2f}, quiet weekends ${weekly['objective_usd']:.2f}; "
        f"without autoscale ${fixed['objective_usd']:.2f} and ${fixed_daily['objective_usd']:.2f}"
    )
    assert weekly["objective_usd"] < daily["objective_usd"] - 1
    # the peak holds all week
    assert fixed["objective_usd"] == pytest.approx(
        fixed_daily["objective_usd"], abs=0.05
    )
    assert check_plan(loaded, weekly) == []
    weekend = weekly["endpoints"][0]["periods"][3]
    assert weekend["days"] == "sat-sun" and weekend["requests_per_s"] == 10
    weekend["pools"][0]["nodes_counted"] = 0
    assert any("0-24" in p and "counted" in p for p in check_plan(loaded, weekly))


def test_checker_sums_limits_per_weekday(tmp_path):
    """Weekday and weekend pools never run at once: a quota both fit within is kept, though their sum is not."""
    loaded, plan = planned(tmp_path, scenario(WEEKLY), "weekly.yaml")
    periods = plan["endpoints"][0]["periods"]
    peak = max(sum(p["nodes"] for p in period["pools"]) for period in periods)
    everything = sum(p["nodes"] for period in periods for p in period["pools"])
    assert everything > peak
    text = scenario(WEEKLY, quota=f"constraints:\n  gpu_quotas: {{aws/H100: {peak}}}\n")
    path = tmp_path / "quota.yaml"
    path.write_text(text, encoding="utf-8")
    assert check_plan(load_scenario(path), plan) == []
    tight = tmp_path / "tight.yaml"
    tight.write_text(
        scenario(
            WEEKLY, quota=f"constraints:\n  gpu_quotas: {{aws/H100: {peak - 1}}}\n"
        ),
        encoding="utf-8",
    )
    assert any(
        p.startswith("quota aws/H100 mon") or p.startswith("quota aws/H100 tue")
        for p in check_plan(load_scenario(tight), plan)
    )


def test_replay_weights_each_period_by_its_days():
    """Weekdays short of capacity more often than weekends: the replay's share is 5/7 and 2/7 of each."""
    lam, replace_h = 0.5, 0.25
    away = lam * replace_h / (1 + lam * replace_h)
    weekday, weekend = (
        Pool(3, 2.0, lam, replace_h, (10.0,), (1.0,)),
        Pool(3, 1.0, lam, replace_h, (10.0,), (1.0,)),
    )
    analytic = 5 / 7 * below_capacity(3, away, 2.0) + 2 / 7 * below_capacity(
        3, away, 1.0
    )
    result = replay(
        [
            PeriodPlan(24.0, (5.0,), (weekday,), (0, 1, 2, 3, 4)),
            PeriodPlan(24.0, (2.0,), (weekend,), (5, 6)),
        ],
        days=350,
        seed=3,
    )
    print(
        f"below capacity: simulated {result.below_capacity_share:.4f}, analytic {analytic:.4f}"
    )
    assert result.below_capacity_share == pytest.approx(analytic, rel=0.15)


@pytest.mark.parametrize(
    "profile,message",
    [
        (
            """\
    - {days: mon-fri, hours: "0-24", requests_per_s: 10}
    - {days: sat, hours: "0-24", requests_per_s: 5}
""",
            "hours on sun must cover 0-24",
        ),
        (
            """\
    - {days: mon-thu, hours: "0-24", requests_per_s: 10}
    - {days: weekend, hours: "0-24", requests_per_s: 5}
""",
            "expected weekdays such as",
        ),
        (
            """\
    - {days: daily, hours: "0-24", requests_per_s: 10}
    - {days: sat-sun, hours: "0-24", requests_per_s: 5}
""",
            "hours on sat must cover",
        ),  # daily already covers the weekend
    ],
)
def test_bad_weekly_profiles_get_one_located_line(tmp_path, profile, message):
    path = tmp_path / "bad.yaml"
    path.write_text(scenario(profile), encoding="utf-8")
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "bad.yaml:" in lines[0], (
        result.output
    )
