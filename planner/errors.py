"""The one exception type the CLI turns into a one-line message and exit status 2."""

from __future__ import annotations

import difflib


class TimeLimitReached(Exception):
    """The time limit ran out before any plan was found, in work the solver's own limit does not cover (building
    endpoints' options): one line saying what was under way, and exit status 3."""


class PlannerError(Exception):
    """A problem with the user's input, phrased so the user can act on it.

    `where` names the file and the place in it (``file:line`` or ``file: key.path``).
    """

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return printable(
            f"{self.where}: {self.message}" if self.where else self.message
        )


def printable(text: str) -> str:
    """Escape what would break the one-line promise or hide in a terminal (newlines, U+2028, controls)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def did_you_mean(name: str, choices) -> str:
    """' (did you mean X?)' when a close valid name exists, else ''."""
    lowered = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


class NoPlan(PlannerError):
    """`planner simulate` planned the input itself and found no plan to replay: exit status 1 when it is
    infeasible, 3 when the time limit or CP-SAT ended the search before any plan, as `solve` or `batch` would."""

    def __init__(self, message: str, where: str | None, status: str):
        super().__init__(message, where)
        self.status = status
