"""Where a sweep's points run: inline (`--workers 1`), in local processes, or on a Dask cluster, each a
`concurrent.futures.Executor`; a cluster is checked for workers running this planner before it is used.
"""

from __future__ import annotations

import gc
import os
import re
from concurrent.futures import Executor, Future

from planner.errors import PlannerError


class InlineExecutor(Executor):
    """Runs each submitted call at once in this process (`--workers 1`)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed back through the future, like any executor
            future.set_exception(exc)
        return future


DASK_TIMEOUT_S = 10.0  # connecting to a scheduler, and waiting for its first worker


def make_executor(processes: int | None = None, executor: str = "local") -> Executor:
    """`--executor`: `local` is `processes` local processes (default one per core; inline for one);
    `dask://HOST:PORT` is that Dask cluster, which runs as many points at once as it has worker
    threads, so `processes` is refused rather than silently ignored."""
    if executor == "local":
        processes = processes or os.cpu_count() or 1
        if processes <= 1:
            return InlineExecutor()
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(
            max_workers=processes, initializer=_ignore_interrupts
        )
    address = dask_address(executor)
    if processes is not None:
        raise PlannerError(
            "sets local processes; a Dask cluster runs as many points at once as it has worker "
            "threads; drop --processes or use --executor local",
            "--processes",
        )
    return dask_executor(address)


def dask_address(text: str) -> str:
    """`dask://HOST:PORT` -> the scheduler's `tcp://HOST:PORT`."""
    match = re.fullmatch(
        r"dask://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})", text.strip()
    )
    if not match or not 0 < int(match[2]) < 65536:
        raise PlannerError(
            f"expected local or dask://HOST:PORT (e.g. dask://10.0.0.5:8786), got {text!r}",
            "--executor",
        )
    return f"tcp://{match[1]}:{match[2]}"


class DaskExecutor(Executor):
    """A Dask client's `concurrent.futures` executor that owns the client: the end of `with` closes
    it, and leaving `with` on an error or Ctrl-C cancels the points still queued on the cluster."""

    def __init__(self, client):
        self.client, self.pool = client, client.get_executor()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        try:
            self.pool.shutdown(wait=wait and not cancel_futures)
        finally:
            self.client.close()

    def __exit__(self, exc_type, exc_value, traceback):
        self.shutdown(wait=exc_type is None)
        return False


def dask_executor(address: str) -> DaskExecutor:
    """Connect to the scheduler at `address` within DASK_TIMEOUT_S; one line if that fails."""
    try:
        from distributed import Client
    except ImportError:
        raise PlannerError(
            "dask:// needs the dask extra: pip install 'gpu-planner[dask]'",
            "--executor",
        ) from None
    try:
        client = Client(address, timeout=DASK_TIMEOUT_S, set_as_default=False)
    except OSError as exc:  # refused, unknown host, or no answer in time
        message = f"cannot reach a Dask scheduler at {address}: {exc}"
    except Exception:  # noqa: BLE001 - garbage where a message's length should be (MemoryError), and the like
        message = f"{address} answers, but not as a Dask scheduler (the dashboard's port? the scheduler's is 8786)"
    else:
        try:
            _check_workers(client, address)
        except BaseException:
            client.close()
            raise
        return DaskExecutor(client)
    # Close the half-made client (still connected to whatever answered) now: left to interpreter
    # exit, its close waits twice the timeout, then prints a traceback.
    gc.collect()
    raise PlannerError(message, "--executor")


def _check_workers(client, address: str) -> None:
    """A cluster without workers would hang the sweep, and a worker without this planner's version
    would fail every point with a traceback (or plan differently): say so in one line instead."""
    from importlib.metadata import version

    try:
        client.wait_for_workers(1, timeout=DASK_TIMEOUT_S)
    except TimeoutError:
        raise PlannerError(
            f"the Dask scheduler at {address} has no workers after {DASK_TIMEOUT_S:g} s; start "
            f"some with `dask worker {address}`",
            "--executor",
        ) from None
    here = version("gpu-planner")
    for worker, there in client.run(version, "gpu-planner", on_error="return").items():
        if there != here:
            has = f"gpu-planner {there}" if isinstance(there, str) else "no gpu-planner"
            raise PlannerError(
                f"Dask worker {worker} has {has} (here {here}); install the same version on "
                "every worker",
                "--executor",
            )


def _ignore_interrupts() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops the sweep with one line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
