"""A plan's job as a dstack task (https://dstack.ai/docs/concepts/tasks: `.dstack.yml`), pinned to the plan's
backend, region and instance type, `dstack apply`'d."""

from __future__ import annotations

from planner.launch.jobs import LaunchJob, placeholder
from planner.launch.render import (
    CHECKPOINT_DIR,
    DATA_DIR,
    HEALTH_PATH,
    SERVE_PORT,
    accelerator,
    dump,
    environment,
    service_summary,
    summary,
)

BACKENDS = {
    "aws": "aws",
    "azure": "azure",
    "cudo": "cudo",
    "do": "digitalocean",
    "gcp": "gcp",
    "lambda": "lambda",
    "nebius": "nebius",
    "runpod": "runpod",
    "vast": "vastai",
}
"""The planner's provider names as dstack's backends (`BackendType`); fluidstack, hyperbolic and paperspace
have none."""
SPOT_POLICY = {
    "on_demand": "on-demand",
    "spot": "spot",
    "spot_fallback": "auto",
    "reserved": "on-demand",
    "capacity_block": "on-demand",
    "flex_start": "on-demand",
}
RETRY_EVENTS = ["no-capacity", "interruption"]


def supported(job: LaunchJob) -> str:
    if job.provider not in BACKENDS:
        return f"dstack has no {job.provider} backend"
    return ""


def _duration(hours: float) -> str:
    """dstack's duration: whole minutes."""
    return f"{max(1, round(hours * 60))}m"


def task_file(job: LaunchJob) -> str:
    task: dict = {
        "type": "task",
        "name": job.slug,
        "nodes": job.nodes,
        "backends": [BACKENDS[job.provider]],
        "regions": [job.region],
        "instance_types": [job.instance_type],
        "resources": {"gpu": accelerator(job)},
        "spot_policy": SPOT_POLICY.get(job.market, "on-demand"),
    }
    notes = []
    if job.on_spot:
        # retried after a preemption or a stockout for as long as the deadline leaves, else for a week
        budget = job.deadline_h if job.deadline_h is not None else 7 * 24
        task["retry"] = {"on_events": RETRY_EVENTS, "duration": _duration(budget)}
    if job.market == "spot_fallback":
        notes.append(
            "spot_policy auto takes spot where it can be had, else on demand; the plan also moves to on demand "
            "when the hours left to the deadline ($PLANNER_DEADLINE_S) fall to the work left plus a restart, "
            "which dstack cannot express: re-apply with spot_policy: on-demand then"
        )
    task["env"] = [f"{k}={v}" for k, v in environment(job).items()]
    volumes = [f"{placeholder('checkpoint-volume')}:{CHECKPOINT_DIR}"]
    if job.data_gib:
        volumes.append(f"{placeholder('data-volume')}:{DATA_DIR}")
    task["volumes"] = [
        {"name": name, "path": path}
        for name, path in (v.split(":", 1) for v in volumes)
    ]
    task["commands"] = [
        "echo 'REPLACE-ME-command: your job, saving a checkpoint to $PLANNER_CHECKPOINT_DIR every "
        "$PLANNER_CHECKPOINT_INTERVAL_S seconds and resuming from the latest one' && exit 1"
    ]
    if job.storage is not None:
        notes.append(
            f"the plan keeps checkpoints on {job.storage.name} ({job.storage.storage_class}): create the "
            f"volumes as dstack network volumes there, or mount it in the commands"
        )
    header = summary(job) + notes
    header.append(f"launch: dstack apply -f {job.slug}.dstack.yml")
    return dump([task], header)


def service_file(service) -> str:
    """An endpoint pool as a dstack service: replicas between the plan's fewest and most nodes, scaled on
    requests per second."""
    task: dict = {
        "type": "service",
        "name": service.slug,
        "port": SERVE_PORT,
        "backends": [BACKENDS[service.provider]],
        "regions": [service.region],
        "instance_types": [service.instance_type],
        "resources": {"gpu": accelerator(service)},
        "spot_policy": SPOT_POLICY.get(service.market, "on-demand"),
        "probes": [{"type": "http", "url": HEALTH_PATH}],
    }
    if service.min_nodes == service.max_nodes:
        task["replicas"] = service.max_nodes
    else:
        task["replicas"] = f"{service.min_nodes}..{service.max_nodes}"
        task["scaling"] = {
            "metric": "rps",
            "target": max(1, round(service.rps_per_node or 1.0)),
        }
    task["commands"] = [
        "echo 'REPLACE-ME-serve-command: your server on port 8000 answering /health' && exit 1"
    ]
    header = service_summary(service)
    header.append(f"launch: dstack apply -f {service.slug}.dstack.yml")
    return dump([task], header)


LAUNCH = "dstack apply -y -d -f {file}"
SERVE = LAUNCH
