"""The one exception type the CLI turns into a one-line message and exit status 2."""
from __future__ import annotations


class PlannerError(Exception):
    """A problem with the user's input, phrased so the user can act on it.

    `where` names the file and the place in it (``file:line`` or ``file: key.path``).
    """

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message
