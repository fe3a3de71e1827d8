"""A plan as Kueue objects for a Kubernetes cluster per provider: a ResourceFlavor per (instance type, market)
the plan uses, a ClusterQueue holding the scenario's quotas on those flavours (reserved, then on demand, then
spot), a LocalQueue, and per job a suspended batch/v1 Job that Kueue admits."""

from __future__ import annotations

from planner.launch.jobs import LaunchJob, Quota, slug
from planner.launch.render import (
    MARKET_WORDS,
    RUN_PLACEHOLDER,
    dump,
    environment,
    labels,
    summary,
)

API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
INSTANCE_LABEL = "node.kubernetes.io/instance-type"
NAMESPACE = "replace-me-namespace"
IMAGE = "REPLACE-ME-image"

CAPACITY_LABELS = {
    # Karpenter's node label on EKS
    "aws": (
        "karpenter.sh/capacity-type",
        {"on_demand": "on-demand", "spot": "spot", "reserved": "reserved"},
    ),
    # GKE labels Spot VMs' nodes; on-demand nodes carry no such label, so the flavour names the instance type alone
    "gcp": ("cloud.google.com/gke-spot", {"spot": "true"}),
    # AKS labels spot node pools; regular nodes carry no such label
    "azure": ("kubernetes.azure.com/scalesetpriority", {"spot": "spot"}),
}
GENERIC_LABEL = "planner/market"
"""Where the provider's Kubernetes names no market label: a label the cluster's nodes must be given."""

GPU_RESOURCES = {"AMD": "amd.com/gpu", "Intel": "habana.ai/gaudi"}
NVIDIA = "nvidia.com/gpu"
PURCHASED = {"capacity_block": "reserved", "flex_start": "on_demand"}
"""A scenario's purchase options as flavour markets: a block's nodes are reserved capacity; a flex-start's are
on-demand nodes that come later (GKE queues them with a ProvisioningRequest, which the cluster sets up)."""
MARKET_ORDER = ("reserved", "on_demand", "spot")
"""Flavours in the order Kueue tries them: capacity already paid for, then on demand, then spot."""


def _market(job: LaunchJob) -> str:
    """The flavour's market: spot_fallback starts on spot (the move to on demand is the team's, by the plan's rule)."""
    if job.market == "spot_fallback":
        return "spot"
    return PURCHASED.get(job.market, job.market)


def _node_labels(provider: str, instance_type: str, market: str) -> dict[str, str]:
    key, values = CAPACITY_LABELS.get(provider, (GENERIC_LABEL, {}))
    found = {INSTANCE_LABEL: instance_type}
    if provider not in CAPACITY_LABELS:
        found[key] = market.replace("_", "-")
    elif market in values:
        found[key] = values[market]
    return found


def flavour_name(job: LaunchJob) -> str:
    return slug(f"{job.provider}-{job.instance_type}-{_market(job)}", 253)


def queue_files(
    provider: str,
    jobs: list[LaunchJob],
    limits: list[Quota],
    gpus: dict[str, tuple[str, str]],
    reserved: dict[str, int],
) -> str:
    """The provider's queue objects: flavours, the ClusterQueue with its quotas, the LocalQueue (`gpus`: each
    GPU's vendor and family; `reserved`: nodes bought per reservation, a reserved flavour's quota)."""
    flavours: dict[str, LaunchJob] = {}
    for job in sorted(
        jobs, key=lambda j: (MARKET_ORDER.index(_market(j)), j.instance_type)
    ):
        flavours.setdefault(flavour_name(job), job)
    groups: dict[str, list[dict]] = {}
    notes, sources = [], {}
    for name, job in flavours.items():
        vendor, family = gpus.get(job.gpu, ("NVIDIA", job.gpu))
        quota, why = _quota(job, jobs, limits, reserved, family)
        notes.append(f"{name}: {quota} GPUs ({why})")
        sources.setdefault(why, []).append(name)
        resource = GPU_RESOURCES.get(vendor, NVIDIA)
        groups.setdefault(resource, []).append(
            {"name": name, "resources": [{"name": resource, "nominalQuota": quota}]}
        )
    documents: list[dict] = [
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {
                "nodeLabels": _node_labels(
                    job.provider, job.instance_type, _market(job)
                )
            },
        }
        for name, job in flavours.items()
    ]
    queue = slug(provider, 63)
    documents.append(
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": queue},
            "spec": {
                "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [
                    {"coveredResources": [resource], "flavors": flavors}
                    for resource, flavors in groups.items()
                ],
                "flavorFungibility": {
                    "whenCanBorrow": "MayStopSearch",
                    "whenCanPreempt": "TryNextFlavor",
                },
            },
        }
    )
    documents.append(
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": NAMESPACE},
            "spec": {"clusterQueue": queue},
        }
    )
    header = [
        f"Kueue queues for the plan's jobs at {provider}: one flavour per instance type and market, tried in",
        "the order reserved, on demand, spot; GPU quotas per flavour:",
        *[f"  {note}" for note in notes],
    ]
    for why, names in sources.items():
        if len(names) > 1 and "quota" in why:
            header.append(
                f"{why} covers {', '.join(names)} together; Kueue holds each flavour to it on its own"
            )
    if provider not in CAPACITY_LABELS:
        header.append(
            f"{provider}'s nodes carry no standard market label: label them {GENERIC_LABEL}=on-demand|spot"
        )
    header.append(
        f"fill in: {NAMESPACE} (the namespace the team's jobs run in); apply with kubectl apply -f"
    )
    return dump(documents, header)


def _quota(
    job: LaunchJob,
    jobs: list[LaunchJob],
    limits: list[Quota],
    reserved: dict[str, int],
    family: str,
) -> tuple[int, str]:
    """GPUs at once on the job's flavour: a reservation's nodes bought; else the tightest of the scenario's
    limits that cover it (the node limit on its offer, the GPU quota at its provider for its GPU family, the
    provider's quota); else what the plan runs there at its busiest."""
    if (
        _market(job) == "reserved" and job.reservation not in reserved
    ):  # bought for this job
        return job.nodes * job.gpus_per_node, f"{job.nodes} nodes bought for {job.name}"
    if job.market == "reserved":
        bought = sum(
            nodes
            for name, nodes in reserved.items()
            if any(
                j.reservation == name
                for j in jobs
                if flavour_name(j) == flavour_name(job)
            )
        )
        return bought * job.gpus_per_node, f"{bought} reserved nodes bought"
    covering = []
    for q in limits:
        if q.provider != job.provider or q.gpus is None:
            continue
        if q.instance_type:
            if (q.region, q.instance_type) == (job.region, job.instance_type):
                covering.append(
                    (q.gpus, f"node limit of {q.nodes} nodes on {q.region}")
                )
        elif q.gpu:
            if q.gpu.lower() in (job.gpu.lower(), family.lower()):
                covering.append(
                    (q.gpus, f"the scenario's quota of {q.gpus} {q.gpu} GPUs")
                )
        else:
            covering.append(
                (q.gpus, f"the scenario's quota of {q.gpus} GPUs at {q.provider}")
            )
    if covering:
        return min(covering)
    same = [j for j in jobs if flavour_name(j) == flavour_name(job)]
    return _busiest(same), "what the plan runs there at once; no quota in the scenario"


def _busiest(jobs: list[LaunchJob]) -> int:
    """The most GPUs the jobs hold at once: all together in a scenario's plan, by their times in a schedule."""
    if any(j.start is None for j in jobs):
        return sum(j.gpus for j in jobs)
    events = sorted(
        [(j.start, j.gpus) for j in jobs] + [(j.end, -j.gpus) for j in jobs],
        key=lambda e: (e[0], e[1]),
    )
    held = most = 0
    for _, change in events:
        held += change
        most = max(most, held)
    return most


def job_file(job: LaunchJob, gpus: dict[str, tuple[str, str]]) -> str:
    """A suspended Job Kueue admits on the job's flavour (its nodes pinned to the planned market)."""
    resource = GPU_RESOURCES.get(gpus.get(job.gpu, ("NVIDIA", ""))[0], NVIDIA)
    market = _market(job)
    document = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.slug,
            "namespace": NAMESPACE,
            "labels": {QUEUE_LABEL: slug(job.provider, 63), **labels(job)},
        },
        "spec": {
            "suspend": True,
            "parallelism": job.nodes,
            "completions": job.nodes,
            "completionMode": "Indexed",
            "backoffLimit": 6 if job.on_spot else 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": _node_labels(
                        job.provider, job.instance_type, market
                    ),
                    "containers": [
                        {
                            "name": "job",
                            "image": IMAGE,
                            "command": ["/bin/sh", "-c", RUN_PLACEHOLDER],
                            "env": [
                                {"name": k, "value": v}
                                for k, v in environment(job).items()
                            ],
                            "resources": {
                                "requests": {resource: job.gpus_per_node},
                                "limits": {resource: job.gpus_per_node},
                            },
                        }
                    ],
                }
            },
        },
    }
    header = summary(job)
    if job.market == "spot_fallback":
        header.append(
            "Kueue admits it on spot; the plan's move to on demand (when the hours left to the deadline fall to "
            "the work left plus a restart) is the team's: re-create it with the on-demand flavour's labels"
        )
    header.append(
        f"fill in: {IMAGE}, the command, {NAMESPACE}; checkpoint and data volumes are the cluster's "
        f"({MARKET_WORDS.get(job.market, job.market)})"
    )
    return dump([document], header)
