"""Native searches run so that Ctrl-C keeps meaning "stop, status 130".

A signal's Python handler runs only once the main thread is back in Python, and neither CP-SAT nor
HiGHS returns there while it searches: a Ctrl-C waited for the search to end. Here the search runs
off the main thread while the main thread waits, so the command's own handler answers at once; the
search is then told to stop and waited for (it stops within milliseconds), so nothing native is still
running when the command exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def call(search: Callable[[], T], stop: Callable[[], None]) -> T:
    """`search()`, interruptible from the main thread: on an interrupt, `stop()` until it ends, then the interrupt
    goes on. Off the main thread (no signal arrives there) it simply runs."""
    if threading.current_thread() is not threading.main_thread():
        return search()
    outcome: dict = {}
    # not Thread.join: an interrupted join can mark a running thread as stopped
    finished = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = search()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=run, name="search", daemon=True).start()
    try:
        while not finished.wait(0.05):
            pass
    except (
        BaseException
    ):  # an interrupt: stop the search and let it wind down before passing it on
        stop()
        while not finished.wait(
            0.1
        ):  # again, in case the search had not begun when the first stop came
            stop()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
