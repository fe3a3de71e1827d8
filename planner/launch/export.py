"""`planner export`: a plan (or a quarter's schedule) as the files a launcher takes, one per job, and for a
quarter a script that launches the runs in order at their scheduled starts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.launch import dstack, kueue, skypilot
from planner.launch.jobs import (
    PLACEHOLDER,
    LaunchJob,
    LaunchService,
    plan_jobs,
    plan_services,
    quotas,
    schedule_jobs,
)


@dataclass(frozen=True)
class ExportFile:
    name: str  # relative to the output folder
    text: str
    executable: bool = False


@dataclass(frozen=True)
class Export:
    launcher: str
    files: list[ExportFile]
    skipped: list[tuple[str, str]]  # (job, why no file)

    @property
    def placeholders(self) -> list[str]:
        """Every `REPLACE-ME-...` the files hold, for the team to fill in."""
        found = set()
        for f in self.files:
            found |= set(re.findall(rf"{PLACEHOLDER}-[a-z-]*[a-z]", f.text, re.I))
        return sorted(found, key=str.lower)


def _gpus(catalog) -> dict[str, tuple[str, int]]:
    """Each offer's GPU and GPUs per node, by `provider/region/instance_type`."""
    o = catalog.offers
    return dict(zip(o["key"], zip(o["gpu"], o["gpus_per_node"].astype(int))))


def export_plan(loaded, record, launcher: str) -> Export:
    """A `planner solve` plan's jobs (`loaded`: its scenario)."""
    workloads = {w.name: w for w in loaded.scenario.workloads}
    gpus = _gpus(loaded.catalog)
    jobs = plan_jobs(record, workloads, gpus)
    services = plan_services(record.endpoints, gpus)
    return _export(
        jobs, services, loaded.scenario.constraints, loaded.catalog, launcher, {}
    )


def export_schedule(loaded, record, launcher: str) -> Export:
    """A `planner batch` schedule's runs (`loaded`: its quarter), with the script that starts them in order."""
    gpus = _gpus(loaded.catalog)
    jobs = schedule_jobs(record, loaded.quarter, gpus)
    services = plan_services(record.endpoints, gpus)
    reserved = {}
    for option, bought in zip(loaded.quarter.reservations, record.reservations):
        if bought.nodes:
            reserved[option.label] = bought.nodes
    return _export(
        jobs, services, loaded.quarter.constraints, loaded.catalog, launcher, reserved
    )


SUFFIX = {"skypilot": ".sky.yaml", "dstack": ".dstack.yml", "kueue": ".job.yaml"}


def _export(
    jobs: list[LaunchJob],
    services: list[LaunchService],
    constraints,
    catalog,
    launcher: str,
    reserved: dict[str, int],
) -> Export:
    """The files of every job and endpoint pool (`reserved`: a quarter's reservations bought, nodes by name)."""
    facts = {name: (gpu.vendor, gpu.family) for name, gpu in catalog.gpus.items()}
    files, skipped, launched = [], [], []
    if launcher == "kueue":
        limits = quotas(constraints, jobs)
        for provider in sorted({j.provider for j in jobs}):
            mine = [j for j in jobs if j.provider == provider]
            files.append(
                ExportFile(
                    f"{provider}.queues.yaml",
                    kueue.queue_files(provider, mine, limits, facts, reserved),
                )
            )
        files += [
            ExportFile(f"{j.slug}{SUFFIX[launcher]}", kueue.job_file(j, facts))
            for j in jobs
        ]
        launched = [(j, "kubectl create -f {file}") for j in jobs]
        skipped += [
            (
                s.name,
                "Kueue queues batch jobs; an endpoint is a Deployment the cluster serves",
            )
            for s in services
        ]
    else:
        module = skypilot if launcher == "skypilot" else dstack
        for item, render, command in [
            *((j, module.task_file, module.LAUNCH) for j in jobs),
            *((s, module.service_file, module.SERVE) for s in services),
        ]:
            why = module.supported(item)
            if why:
                skipped.append((item.name, why))
                continue
            files.append(ExportFile(f"{item.slug}{SUFFIX[launcher]}", render(item)))
            launched.append((item, command))
    timed = [(item, command) for item, command in launched if item.start is not None]
    if timed:
        files.append(_launch_script(timed, launcher))
    return Export(launcher, files, skipped)


def _launch_script(launched: list, launcher: str) -> ExportFile:
    """A POSIX shell script that starts each run at its scheduled time, in order (GNU date)."""
    lines = [
        "#!/bin/sh",
        "# The schedule's runs, each launched at its planned start (a run that starts late still keeps the order).",
        "# Every run's predecessors end before it starts in the plan; check they did before it launches.",
        "set -eu",
        'cd "$(dirname "$0")"',
        "wait_until() {",
        '  at=$(date -u -d "$1" +%s); now=$(date -u +%s)',
        '  if [ "$at" -gt "$now" ]; then sleep $((at - now)); fi',
        "}",
    ]
    if launcher == "kueue":
        lines.append('for queues in *.queues.yaml; do kubectl apply -f "$queues"; done')
    for item, command in sorted(launched, key=lambda x: (x[0].start, x[0].slug)):
        after = getattr(item, "after", ())
        lines.append("")
        lines.append(
            f"# {item.name}: {item.start.isoformat()} to {item.end.isoformat()}"
            + (f", after {', '.join(after)}" if after else "")
        )
        lines.append(f"wait_until {item.start.strftime('%Y-%m-%dT%H:%M:%SZ')}")
        lines.append(
            command.format(name=item.slug, file=f"{item.slug}{SUFFIX[launcher]}")
        )
    return ExportFile("launch.sh", "\n".join(lines) + "\n", executable=True)
