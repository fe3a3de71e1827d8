"""A serving endpoint's load and promise as a scenario writes them: its request mix, its traffic (steady or by
weekly period), its latency SLO, and a replica's measured capacity where one was measured.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from planner.schema.fields import Fraction, Seconds, Strict


class RequestBucket(Strict):
    """One request size of an endpoint's mix and its share of the requests (Mélange's histogram cell)."""

    prompt_tokens: int = Field(gt=0, le=10_000_000, description="tokens per prompt")
    output_tokens: int = Field(
        gt=0, le=10_000_000, description="tokens generated per request"
    )
    share: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0, description="share of requests of this size (the shares add up to 1)"
    )


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_REQUESTS_PER_S = 1e7
"""A generous bound on any request rate (ten million a second), so a typo cannot ask for a billion nodes."""


def weekdays_of(days: str) -> tuple[int, ...]:
    """ "mon-fri", "sat-sun", "fri-mon" (wrapping), "mon,wed" or "daily" -> weekday numbers (Monday 0)."""
    found: list[int] = []
    for part in days.lower().replace(" ", "").split(","):
        first, dash, last = part.partition("-")
        if part == "daily":
            found += range(7)
            continue
        if first not in WEEKDAYS or (dash and last not in WEEKDAYS):
            raise ValueError(
                f'days {days!r}: expected weekdays such as "mon-fri", "sat-sun" or "mon,wed"'
            )
        a, b = (
            WEEKDAYS.index(first),
            WEEKDAYS.index(last) if dash else WEEKDAYS.index(first),
        )
        found += [(a + k) % 7 for k in range((b - a) % 7 + 1)]
    if len(set(found)) != len(found):
        raise ValueError(f"days {days!r} names a weekday twice")
    return tuple(sorted(found))


class TrafficPeriod(Strict):
    """`{hours: "8-20", requests_per_s: 40}`: the rate during those hours of every day, or, with
    `days: mon-fri`, of those days only (a weekly profile)."""

    hours: str = Field(description='span of hours of the day: "8-20"')
    days: str = Field(
        "daily",
        description="weekdays the period applies to: mon-fri, sat-sun, mon,wed, daily",
    )
    requests_per_s: Annotated[float, Field(ge=0, le=MAX_REQUESTS_PER_S)] = Field(
        description="the rate during those hours"
    )

    @field_validator("days")
    @classmethod
    def _weekdays(cls, days: str) -> str:
        weekdays_of(days)
        return days

    @property
    def weekdays(self) -> tuple[int, ...]:
        return weekdays_of(self.days)

    @field_validator("hours")
    @classmethod
    def _span(cls, hours: str) -> str:
        start, dash, end = hours.partition("-")
        try:
            a, b = float(start), float(end)
        except ValueError:
            raise ValueError(
                f'hours {hours!r}: expected START-END in hours of the day, e.g. "8-20"'
            ) from None
        if not dash or not 0 <= a < b <= 24:
            raise ValueError(
                f"hours {hours!r}: expected START-END with 0 <= START < END <= 24"
            )
        return hours

    @property
    def span(self) -> tuple[float, float]:
        start, _, end = self.hours.partition("-")
        return float(start), float(end)


class Traffic(Strict):
    """A steady rate or a daily profile, and the mix of request sizes (one bucket by default)."""

    requests_per_s: Annotated[float, Field(gt=0, le=MAX_REQUESTS_PER_S)] | None = Field(
        None, description="a steady rate all day"
    )
    profile: tuple[TrafficPeriod, ...] = Field(
        (), description="or a rate per span of hours (and weekdays)"
    )
    buckets: tuple[RequestBucket, ...] = Field(
        (RequestBucket(prompt_tokens=512, output_tokens=256),),
        description="request sizes and their shares (default: one of 512 prompt and 256 output tokens)",
    )
    slices: int = Field(
        4,
        ge=1,
        le=64,
        description="parts each bucket's rate may be split into across GPU types "
        "(Mélange's slice_factor)",
    )

    @model_validator(mode="after")
    def _one_form(self) -> Traffic:
        if (self.requests_per_s is None) == (not self.profile):
            raise ValueError(
                "give either requests_per_s or a daily profile of {hours, requests_per_s}"
            )
        for day in range(7) if self.profile else ():
            spans = sorted(p.span for p in self.profile if day in p.weekdays)
            if (
                not spans
                or spans[0][0] != 0
                or spans[-1][1] != 24
                or any(a[1] != b[0] for a, b in zip(spans, spans[1:]))
            ):
                on = (
                    ""
                    if all(p.days == "daily" for p in self.profile)
                    else f" on {WEEKDAYS[day]}"
                )
                raise ValueError(
                    f"the profile's hours{on} must cover 0-24 once, without gaps or overlaps"
                )
        total = sum(b.share for b in self.buckets)
        if abs(total - 1) > 1e-6:
            raise ValueError(f"bucket shares add up to {total:g}, expected 1")
        return self

    @property
    def periods(self) -> tuple[TrafficPeriod, ...]:
        """The profile's periods by first weekday, then time of day (one all-day period for a steady rate)."""
        if not self.profile:
            return (TrafficPeriod(hours="0-24", requests_per_s=self.requests_per_s),)
        return tuple(sorted(self.profile, key=lambda p: (p.weekdays[0], p.span)))

    @property
    def weekly(self) -> bool:
        return any(p.days != "daily" for p in self.profile)

    @property
    def peak(self) -> float:
        return max(p.requests_per_s for p in self.periods)

    def scaled(self, factor: float) -> Traffic:
        """The same profile and request sizes at `factor` times every period's rate (`whatif --rate`)."""
        return self.model_copy(
            update={
                "requests_per_s": None
                if self.requests_per_s is None
                else self.requests_per_s * factor,
                "profile": tuple(
                    p.model_copy(update={"requests_per_s": p.requests_per_s * factor})
                    for p in self.profile
                ),
            }
        )


class Slo(Strict):
    """Latency targets: time to first token at `quantile`, and the mean time per output token."""

    ttft: Seconds | None = Field(
        None,
        description="time to first token at `quantile` (`500ms`, `2s`); none: no "
        "target",
    )
    tpot: Seconds | None = Field(
        None, description="mean time per output token (`50ms`); none: no target"
    )
    quantile: Fraction = Field(
        0.9, description="the share of requests that must meet the TTFT target"
    )

    @model_validator(mode="after")
    def _a_target(self) -> Slo:
        if self.ttft is None and self.tpot is None:
            raise ValueError(
                "give a latency target: ttft, tpot or both, e.g. {ttft: 500ms, tpot: 50ms}"
            )
        return self

    @property
    def ttft_s(self) -> float:
        """The TTFT target in seconds; no target is no limit."""
        return math.inf if self.ttft is None else self.ttft

    @property
    def tpot_s(self) -> float:
        return math.inf if self.tpot is None else self.tpot


class MeasuredCapacity(Strict):
    """A profiled figure: one replica of `tensor_parallel` GPUs of `gpu` serves `max_requests_per_s`
    of this size within the SLO (what Mélange profiles; replaces the physics for that GPU)."""

    gpu: str = Field(description="GPU name or family it was measured on")
    tensor_parallel: int = Field(1, gt=0, le=64, description="GPUs per replica")
    prompt_tokens: int = Field(gt=0, description="the request size it was measured at")
    output_tokens: int = Field(gt=0, description="the request size it was measured at")
    max_requests_per_s: Annotated[float, Field(gt=0, le=MAX_REQUESTS_PER_S)] = Field(
        description="the most requests/s one replica served within the SLO"
    )
