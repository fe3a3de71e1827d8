"""`planner whatif --executor dask://HOST:PORT`: the same plans on a real Dask cluster, one-line errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import SCENARIOS
from test_bad_input import assert_one_line_error

from planner.errors import PlannerError
from planner.whatif import executors

distributed = pytest.importorskip("distributed")

LORA = SCENARIOS / "lora-finetune.yaml"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local:
        yield local


def dask_option(cluster) -> str:
    return "dask://" + cluster.scheduler_address.removeprefix("tcp://")


def planner_process(*args: str) -> subprocess.CompletedProcess:
    """The CLI in its own interpreter: what a user sees, including anything printed at exit."""
    return subprocess.run(
        [sys.executable, "-m", "planner.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "sweep",
    [("--spot-price", "0.5,1,2"), ("--spot-price", "0.5:2:4", "--preemption", "0.5,2")],
    ids=["one-axis", "two-axis"],
)
def test_a_dask_cluster_gives_the_local_plans(run, cluster, sweep, tmp_path):
    # on the fitted spot process, whose prices move this plan (held to the traces, it stays on on-demand)
    fitted = tmp_path / "lora-fitted.yaml"
    fitted.write_text(
        LORA.read_text().replace(
            "\ncatalogs:", "\ndefaults: {spot_evidence: fitted}\ncatalogs:", 1
        )
    )
    local = run("whatif", fitted, *sweep, "--processes", "1", "--format", "json")
    remote = run(
        "whatif", fitted, *sweep, "--executor", dask_option(cluster), "--format", "json"
    )
    assert local.exit_code == 0 and remote.exit_code == 0, remote.stderr
    assert json.loads(local.stdout)[
        "switches"
    ]  # a sweep with a placement change, bisected on the cluster
    # placements, objectives, switch points: all of it
    assert remote.stdout == local.stdout
    # solved on the cluster
    assert {"solve_run", "find_switches"} <= set(cluster.scheduler.task_prefixes)


@pytest.mark.parametrize(
    "address",
    ["dask://", "spark://x", "dask://host", "dask://host:0", "tcp://host:8786"],
)
def test_bad_addresses(run, address):
    assert_one_line_error(
        run("whatif", LORA, "--spot-price", "0.5,1", "--executor", address),
        "--executor",
        "dask://HOST:PORT",
    )


def test_processes_are_refused_with_a_cluster(run, cluster):
    assert_one_line_error(
        run(
            "whatif",
            LORA,
            "--spot-price",
            "0.5,1",
            "--processes",
            "2",
            "--executor",
            dask_option(cluster),
        ),
        "--processes",
        "--executor local",
    )


def test_missing_distributed_names_the_extra(run, monkeypatch):
    # `import distributed` raises ImportError
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert_one_line_error(
        run(
            "whatif",
            LORA,
            "--spot-price",
            "0.5,1",
            "--executor",
            "dask://127.0.0.1:8786",
        ),
        "--executor",
        "pip install 'gpu-planner[dask]'",
    )


@pytest.mark.slow
def test_an_unreachable_scheduler_fails_within_the_timeout():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = planner_process(
        "whatif",
        str(LORA),
        "--spot-price",
        "0.5,1",
        "--executor",
        f"dask://127.0.0.1:{port}",
    )
    assert time.monotonic() - started < executors.DASK_TIMEOUT_S + 8
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --executor: cannot reach a Dask scheduler")


def test_something_else_on_the_port_is_one_line_and_no_hang_at_exit():
    """Not a scheduler (say, an HTTP server): the half-made client must not hang or print at exit."""
    server = socket.create_server(("127.0.0.1", 0))
    connections = []

    def answer():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connections.append(connection)
            connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 50)

    threading.Thread(target=answer, daemon=True).start()
    try:
        started = time.monotonic()
        result = planner_process(
            "whatif",
            str(LORA),
            "--spot-price",
            "0.5,1",
            "--executor",
            f"dask://127.0.0.1:{server.getsockname()[1]}",
        )
        assert time.monotonic() - started < executors.DASK_TIMEOUT_S
    finally:
        server.close()
        for connection in connections:
            connection.close()
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "answers, but not as a Dask scheduler" in result.stderr


def test_a_scheduler_without_workers_fails_within_the_timeout(run, monkeypatch):
    monkeypatch.setattr(executors, "DASK_TIMEOUT_S", 1.0)
    with distributed.LocalCluster(
        n_workers=0, processes=True, dashboard_address=":0"
    ) as empty:  # tcp, any port
        assert_one_line_error(
            run(
                "whatif",
                LORA,
                "--spot-price",
                "0.5,1",
                "--executor",
                dask_option(empty),
            ),
            "--executor",
            "has no workers after 1 s",
        )


def test_workers_without_this_planner_are_named():
    from importlib.metadata import PackageNotFoundError

    class Client:
        def wait_for_workers(self, n_workers, timeout):
            pass

        def run(self, function, *args, on_error):
            return {
                "tcp://a:1": function(*args),
                "tcp://b:1": PackageNotFoundError("gpu-planner"),
            }

    with pytest.raises(PlannerError, match="worker tcp://b:1 has no gpu-planner"):
        executors._check_workers(Client(), "tcp://s:8786")
