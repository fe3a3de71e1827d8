"""What every launcher's files share: YAML with a comment header, the accelerator as launchers name it, and the
plan's figures in words and as labels."""

from __future__ import annotations

import io
import math

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from planner.launch.jobs import LaunchJob

LAUNCHER_GPU_NAMES = {"H100-SXM": "H100", "A100-40GB": "A100"}
"""Catalog GPU names that launchers spell otherwise (SkyPilot and dstack: `H100` is the SXM part, `A100` the
40 GB one); every other name is the same in both."""

ENV_PREFIX = "PLANNER_"


def accelerator(job: LaunchJob) -> str:
    """`H100:8`: the GPU as SkyPilot and dstack name it, and how many per node."""
    return f"{LAUNCHER_GPU_NAMES.get(job.gpu, job.gpu)}:{job.gpus_per_node}"


def dump(documents: list[dict], header: list[str]) -> str:
    """YAML documents (`---` between them) under `# ` comment lines; multi-line strings as literal blocks."""
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    for line in header:
        out.write(f"# {line}".rstrip() + "\n")
    for index, document in enumerate(documents):
        if index:
            out.write("---\n")
        yaml.dump(_literal(document), out)
    return out.getvalue()


def _literal(value):
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return LiteralScalarString(value)
    return value


MARKET_WORDS = {
    "on_demand": "on demand",
    "spot": "spot",
    "spot_fallback": "spot, moving to on demand when the slack runs out",
    "reserved": "reserved",
    "capacity_block": "on a capacity block bought ahead",
    "flex_start": "flex-start (queued, every node at once)",
}


def summary(job: LaunchJob) -> list[str]:
    """The plan's placement, figures and promise in comment lines."""
    lines = [
        f"{job.name}: {job.nodes} x {job.provider} {job.instance_type} ({job.region}, {job.gpus_per_node} x "
        f"{job.gpu or 'GPU'} per node), {MARKET_WORDS.get(job.market, job.market)}"
        + (f" on reservation {job.reservation}" if job.reservation else "")
    ]
    figures = []
    if job.expected_cost_usd is not None:
        figures.append(f"expected cost ${job.expected_cost_usd:,.2f}")
    if job.expected_wall_h is not None:
        figures.append(f"expected wall time {job.expected_wall_h:,.1f} h")
    if figures:
        lines.append(", ".join(figures))
    if job.deadline_h is not None and math.isfinite(job.deadline_h):
        promise = f"deadline {job.deadline_h:,.1f} h from its start"
        if job.deadline_confidence is not None:
            promise += f", planned to hold with P >= {job.deadline_confidence:g}"
        if job.p_deadline is not None:
            promise += f" (the plan's P: {job.p_deadline:.4f})"
        lines.append(promise)
    if job.start is not None:
        lines.append(
            f"scheduled {job.start.isoformat()} to {job.end.isoformat() if job.end else '?'}"
            + (f", after {', '.join(job.after)}" if job.after else "")
        )
    if job.buy:
        lines.append(f"before launching, {job.buy}")
    if job.reservation:
        lines.append(
            f"on the nodes of reservation {job.reservation}: name that reservation in the launcher's "
            "settings (SkyPilot: aws.specific_reservations; a Kueue flavour labelled reserved)"
        )
    if job.checkpoint_interval_s is not None:
        lines.append(
            f"checkpoint every {job.checkpoint_interval_s} s "
            f"(${ENV_PREFIX}CHECKPOINT_INTERVAL_S): the interval the plan's cost assumes"
        )
    if job.storage is not None:
        lines.append(
            f"storage: {job.storage.name} ({job.storage.storage_class}"
            + (
                f", {job.storage.provisioned_gib:,.0f} GiB provisioned"
                if job.storage.provisioned_gib
                else ""
            )
            + ")"
        )
    return lines


def environment(job: LaunchJob) -> dict[str, str]:
    """What the job can read of its plan: its name, checkpoint cadence and folders, deadline and expected cost."""
    env = {f"{ENV_PREFIX}JOB": job.name}
    if job.checkpoint_interval_s is not None:
        env[f"{ENV_PREFIX}CHECKPOINT_INTERVAL_S"] = str(job.checkpoint_interval_s)
    env[f"{ENV_PREFIX}CHECKPOINT_DIR"] = CHECKPOINT_DIR
    if job.data_gib:
        env[f"{ENV_PREFIX}DATA_DIR"] = DATA_DIR
    if job.deadline_h is not None and math.isfinite(job.deadline_h):
        env[f"{ENV_PREFIX}DEADLINE_S"] = str(round(job.deadline_h * 3600))
    if job.expected_cost_usd is not None:
        env[f"{ENV_PREFIX}EXPECTED_USD"] = f"{job.expected_cost_usd:.2f}"
    return env


def labels(job: LaunchJob) -> dict[str, str]:
    """The plan's figures as labels every cloud and Kubernetes accept (lower case, digits, `-`): cents and
    minutes, whole numbers."""
    out = {"planner-job": job.slug, "planner-market": job.market.replace("_", "-")}
    if job.expected_cost_usd is not None:
        out["planner-expected-cents"] = str(round(job.expected_cost_usd * 100))
    if job.deadline_h is not None and math.isfinite(job.deadline_h):
        out["planner-deadline-minutes"] = str(math.floor(job.deadline_h * 60))
    return out


CHECKPOINT_DIR = "/checkpoints"
DATA_DIR = "/data"

RUN_PLACEHOLDER = (
    "# REPLACE-ME-command: your job, saving a checkpoint to $PLANNER_CHECKPOINT_DIR every\n"
    "# $PLANNER_CHECKPOINT_INTERVAL_S seconds and resuming from the latest one at start\n"
    "echo 'REPLACE-ME-command' && exit 1\n"
)


SERVE_PORT = 8000
HEALTH_PATH = "/health"
SERVE_PLACEHOLDER = (
    "# REPLACE-ME-serve-command: your server on port 8000 answering /health, e.g. vllm serve <model>\n"
    "echo 'REPLACE-ME-serve-command' && exit 1\n"
)


def service_summary(service) -> list[str]:
    """An endpoint pool's plan in comment lines: nodes per traffic period, the SLO, the endpoint's cost."""
    lines = [
        f"{service.endpoint}: {service.provider} {service.instance_type} ({service.region}, "
        f"{service.gpus_per_node} x {service.gpu or 'GPU'} per node), {MARKET_WORDS.get(service.market, service.market)}",
        "nodes per traffic period: "
        + "; ".join(
            f"{hours} {days}: {nodes}" for hours, days, nodes in service.periods
        ),
    ]
    if service.rps_per_node is not None:
        lines.append(
            f"at its busiest the plan routes {service.rps_per_node:.2f} requests/s to each node"
        )
    slo = [
        f"{name} {value:g} s"
        for name, value in (("TTFT", service.ttft_s), ("TPOT", service.tpot_s))
        if value is not None
    ]
    if slo:
        lines.append("SLO: " + ", ".join(slo))
    if service.usd_per_h is not None:
        lines.append(
            f"the endpoint's expected cost: ${service.usd_per_h:,.2f} per hour"
        )
    if service.start is not None:
        lines.append(
            f"serving from {service.start.isoformat()} to {service.end.isoformat()}"
        )
    return lines


def service_labels(service) -> dict[str, str]:
    out = {
        "planner-endpoint": service.slug,
        "planner-market": service.market.replace("_", "-"),
    }
    if service.usd_per_h is not None:
        out["planner-expected-cents-per-hour"] = str(round(service.usd_per_h * 100))
    return out
