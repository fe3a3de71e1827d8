import math

import pytest

from planner.schema.units import (
    format_hours,
    parse_count,
    parse_gib,
    parse_hours,
    parse_usd,
)


@pytest.mark.parametrize(
    "text, hours",
    [
        ("90s", 0.025),
        ("30m", 0.5),
        ("2h", 2.0),
        ("3d", 72.0),
        ("1w", 168.0),
        (1.5, 1.5),
        ("45 min", 0.75),
        ("0.5h", 0.5),
        (2, 2.0),
    ],
)
def test_durations(text, hours):
    assert parse_hours(text) == pytest.approx(hours)


@pytest.mark.parametrize(
    "text, gib",
    [
        ("80GiB", 80.0),
        ("1.5TiB", 1536.0),
        ("500GB", 500e9 / 2**30),
        ("512MiB", 0.5),
        (24, 24.0),
        ("1TB", 1e12 / 2**30),
    ],
)
def test_sizes(text, gib):
    assert parse_gib(text) == pytest.approx(gib)


@pytest.mark.parametrize(
    "text, usd",
    [("$2.50", 2.5), ("$2.50/h", 2.5), ("$50k", 50000.0), ("1.2M", 1.2e6), (3, 3.0)],
)
def test_money(text, usd):
    assert parse_usd(text) == pytest.approx(usd)


@pytest.mark.parametrize(
    "text, count",
    [("7B", 7e9), ("70e9", 70e9), ("2T", 2e12), ("1.5M", 1.5e6), ("300k", 3e5)],
)
def test_counts(text, count):
    assert parse_count(text) == pytest.approx(count)


@pytest.mark.parametrize(
    "parser, text, fragment",
    [
        (parse_hours, "3 fortnights", "unknown time unit 'fortnights'"),
        (parse_gib, "80 GiBs", "unknown size unit 'GiBs'"),
        (parse_hours, "soon", "expected a duration"),
        (parse_hours, True, "boolean"),
        (parse_gib, "nan", "expected a size"),
        (parse_usd, "$5 per hour", "expected an amount of money"),
    ],
)
def test_bad_quantities_name_the_problem(parser, text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parser(text)


def test_format_hours_is_short_and_readable():
    assert [format_hours(h) for h in (10 / 3600, 0.5, 3.25, 72, math.inf)] == [
        "10s",
        "30m",
        "3.2h",
        "3.0d",
        "inf",
    ]
