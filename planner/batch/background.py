"""A value computed in a thread beside the search (the LP bound of `planner batch`): HiGHS and CP-SAT both
release the GIL, so on two cores the two run at once."""

from __future__ import annotations

import threading


class Background:
    """Runs `bound(*args, stop=...)` in a thread beside the search, then `then(value, stop=...)` on its value
    (where given). `wait` gives the first value, `wait_then` the second; `finish()` stops the thread (between
    LPs, or between the branch and cut's nodes) and returns the last value it reached or raises its error;
    leaving the block does the same, but for a Ctrl-C, which only tells it to stop."""

    def __init__(self, bound, *args, then=None):
        self.stop, self.value, self.error = threading.Event(), None, None
        self.then, self.first, self.ready = then, None, threading.Event()
        self.late = False  # a `wait` ended before the value: what the caller did then depended on the clock
        self.thread = (
            threading.Thread(target=self._run, args=(bound, args), daemon=True)
            if bound
            else None
        )

    def _run(self, bound, args):
        try:
            self.value = self.first = bound(*args, stop=self.stop)
            self.ready.set()
            if self.then is not None and self.value is not None:
                self.value = self.then(self.value, stop=self.stop)
        except BaseException as error:  # raised again where the value is wanted
            self.error = error
        finally:
            self.ready.set()

    def __enter__(self):
        if self.thread:
            self.thread.start()
        return self

    def wait(self, seconds: float):
        """Its first value if it comes within `seconds` (None if not, or on error: `finish` raises it)."""
        if self.thread is None:
            return None
        self.late |= not self.ready.wait(max(seconds, 0.0))
        return None if self.error or not self.ready.is_set() else self.first

    def wait_then(self, seconds: float):
        """Its last value if the thread ends within `seconds` (None if not, or on error)."""
        if self.thread is None:
            return None
        self.thread.join(max(seconds, 0.0))
        self.late |= self.thread.is_alive()
        return None if self.error or self.thread.is_alive() else self.value

    def finish(self):
        self.stop.set()
        if self.thread:
            self.thread.join()
        if self.error:
            raise self.error
        return self.value

    def __exit__(self, kind, error, trace):
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.stop.set()  # Ctrl-C ends the command at once: do not wait out the LP (it checks between LPs)
        else:
            self.finish()
