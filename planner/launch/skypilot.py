"""A plan's job as a SkyPilot task (https://docs.skypilot.co: task YAML), launched as a managed job
(`sky jobs launch`), which relaunches it after a preemption and resumes from its checkpoints."""

from __future__ import annotations

from planner.launch.jobs import LaunchJob, placeholder
from planner.launch.render import (
    CHECKPOINT_DIR,
    DATA_DIR,
    HEALTH_PATH,
    RUN_PLACEHOLDER,
    SERVE_PLACEHOLDER,
    SERVE_PORT,
    accelerator,
    dump,
    environment,
    labels,
    service_labels,
    service_summary,
    summary,
)

CLOUDS = {
    "aws": "aws",
    "azure": "azure",
    "cudo": "cudo",
    "do": "do",
    "fluidstack": "fluidstack",
    "gcp": "gcp",
    "hyperbolic": "hyperbolic",
    "lambda": "lambda",
    "nebius": "nebius",
    "paperspace": "paperspace",
    "runpod": "runpod",
    "vast": "vast",
}
"""The planner's provider names as SkyPilot's clouds (`sky.skylet.constants.ALL_CLOUDS`)."""
STORES = {"aws": "s3", "gcp": "gcs", "azure": "azure", "nebius": "nebius"}
"""The object store SkyPilot mounts at each provider, where it has one."""
DATA_URIS = {
    "s3": "s3://{bucket}/{path}",
    "gcs": "gs://{bucket}/{path}",
    "azure": "https://{account}.blob.core.windows.net/{bucket}/{path}",
    "nebius": "nebius://{bucket}/{path}",
}
"""Where a data set lives, as SkyPilot's `source` takes it for each store."""
MAX_RESTARTS_ON_ERRORS = 3
"""A managed job relaunched after a user-code error this many times (preemptions are always recovered)."""


def supported(job: LaunchJob) -> str:
    """'' where SkyPilot can launch the job, else why not."""
    if job.provider not in CLOUDS:
        return f"SkyPilot has no {job.provider} cloud"
    return ""


def _mounts(job: LaunchJob) -> tuple[dict, list[str]]:
    """Checkpoints and data as SkyPilot file mounts where the plan's storage is an object store SkyPilot
    mounts (a local disk keeps its checkpoints in one, and copies its data set onto the node); else the mount
    is the team's, named in a comment."""
    store = STORES.get(job.provider)
    storage = job.storage
    kind = storage.storage_class if storage is not None else "object"
    mounts, notes = {}, []
    if store is not None and kind in ("object", "local"):
        mounts[CHECKPOINT_DIR] = {
            "name": placeholder("checkpoint-bucket"),
            "store": store,
            "mode": "MOUNT_CACHED",
            "persistent": True,
        }
        if job.data_gib:
            mounts[DATA_DIR] = {
                "source": DATA_URIS[store].format(
                    bucket=placeholder("data-bucket"),
                    path=placeholder("data-path"),
                    account=placeholder("storage-account"),
                ),
                "mode": "COPY" if kind == "local" else "MOUNT",
            }
    elif storage is not None:
        notes.append(
            f"mount {storage.name} ({storage.storage_class}) at {CHECKPOINT_DIR}"
            + (f" and the data set at {DATA_DIR}" if job.data_gib else "")
            + " in `setup`: SkyPilot does not create it"
        )
    return mounts, notes


def task_file(job: LaunchJob) -> str:
    resources: dict = {
        "cloud": CLOUDS[job.provider],
        "region": job.region,
        "instance_type": job.instance_type,
        "accelerators": accelerator(job),
        "labels": labels(job),
    }
    notes = []
    if job.market == "spot_fallback":
        resources["ordered"] = [{"use_spot": True}, {"use_spot": False}]
        notes.append(
            "spot first, on demand where spot cannot be had (`ordered`); the plan also moves to on demand "
            "when the hours left to the deadline ($PLANNER_DEADLINE_S) fall to the work left plus a "
            "restart, which SkyPilot cannot express: relaunch with use_spot: false then"
        )
    else:
        resources["use_spot"] = job.on_spot
    if job.on_spot:
        resources["job_recovery"] = {
            "strategy": "FAILOVER",
            "max_restarts_on_errors": MAX_RESTARTS_ON_ERRORS,
        }
    mounts, mount_notes = _mounts(job)
    task: dict = {"name": job.slug, "num_nodes": job.nodes, "resources": resources}
    task["envs"] = environment(job)
    if mounts:
        task["file_mounts"] = mounts
    task["run"] = RUN_PLACEHOLDER
    header = summary(job) + notes + mount_notes
    header.append(f"launch: sky jobs launch -n {job.slug} {job.slug}.sky.yaml")
    return dump([task], header)


def service_file(service) -> str:
    """An endpoint pool as a SkyPilot service (`sky serve up`): its replicas between the plan's fewest and most
    nodes, scaled on the requests per second the plan routes to a node at its busiest."""
    resources = {
        "cloud": CLOUDS[service.provider],
        "region": service.region,
        "instance_type": service.instance_type,
        "accelerators": accelerator(service),
        "use_spot": service.market in ("spot", "spot_fallback"),
        "ports": SERVE_PORT,
        "labels": service_labels(service),
    }
    if service.min_nodes == service.max_nodes:
        policy = {"replicas": service.max_nodes}
    else:
        policy = {
            "replica_policy": {
                "min_replicas": service.min_nodes,
                "max_replicas": service.max_nodes,
                "target_qps_per_replica": round(service.rps_per_node or 1.0, 3),
            }
        }
    task = {
        "name": service.slug,
        "resources": resources,
        "service": {"readiness_probe": HEALTH_PATH, **policy},
        "run": SERVE_PLACEHOLDER,
    }
    header = service_summary(service)
    if service.market in ("spot", "spot_fallback"):
        header.append(
            "the plan's replacement of preempted spot nodes is SkyPilot's own: add "
            "replica_policy.dynamic_ondemand_fallback to cover a stockout with on demand"
        )
    header.append(f"launch: sky serve up -n {service.slug} {service.slug}.sky.yaml")
    return dump([task], header)


LAUNCH = "sky jobs launch -y -d -n {name} {file}"
"""How a quarter's launch script starts one run."""
SERVE = "sky serve up -y -n {name} {file}"
