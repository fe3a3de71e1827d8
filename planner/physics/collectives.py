"""Collectives over NVLink and the network: achievable bus bandwidth, all-reduce, hierarchical and
all-to-all collectives, and how much of their time overlaps compute (`scaling_efficiency`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from planner.physics.gpus import Topology

# Fraction of gradient communication hidden behind the backward pass
# (DDP bucketing / FSDP prefetch).  Backward is 2/3 of a step, so at most
# ~2/3 could hide; 0.5 is a stated judgement, overridable per call.
DEFAULT_OVERLAP = 0.5

# Achievable all-reduce bus bandwidth as a fraction of the unidirectional link
# figure (nccl-tests' busbw definition).
LINK_EFFICIENCY: Mapping[str, float] = MappingProxyType(
    {
        # A100 NVLink: nccl all_reduce ~235 of 300 GB/s; H200 copy 396/450 (stas00).
        "nvlink": 0.80,
        "infinity_fabric": 0.70,  # MI300X xGMI: 313 busbw of 448 GB/s at 8 GPUs (stas00)
        # PCIe: all-reduce crosses CPU root complexes; nccl-tests on PCIe servers give ~20-25 GB/s of
        # 31.5 (PCIe 4), ~40-50 of 63 (PCIe 5).
        "pcie": 0.70,
        # Inter-node, fraction of the per-GPU NIC share (judgement):
        "infiniband": 0.85,  # RDMA + GPUDirect; NDR busbw close to line rate
        "roce": 0.80,  # RDMA over converged Ethernet
        "efa": 0.70,  # AWS SRD via aws-ofi-nccl; somewhat below IB
        # NCCL socket transport over TCP: kernel copies, no GPUDirect, a fraction
        # of line rate (judgement; GCP TCPX/TCPXO do better but are listed here).
        "ethernet": 0.40,
        "none": 0.0,
    }
)

# When a PCIe topology gives no bandwidth: PCIe 4.0 x16, 2 x 31.5 GB/s.
DEFAULT_PCIE_BIDIR_GBS = 64.0

# Per all-reduce launch latency for tensor-parallel decode (judgement;
# NCCL small-message latency ~5-10 us on NVLink, tens of us across PCIe).
ALLREDUCE_LATENCY_S: Mapping[str, float] = MappingProxyType(
    {"nvlink": 8e-6, "infinity_fabric": 10e-6, "pcie": 25e-6, "none": 0.0}
)


# Gradient buckets: PyTorch DDP's bucket_cap_mb = 25 (Megatron and FSDP use similar sizes).
BUCKET_BYTES = 25 * 2**20

# Per-hop latency of a collective across nodes (judgement from NCCL small-message
# figures: a few us on InfiniBand, tens of us on EFA's SRD and on TCP sockets).
NETWORK_LATENCY_S: Mapping[str, float] = MappingProxyType(
    {"infiniband": 5e-6, "roce": 8e-6, "efa": 15e-6, "ethernet": 50e-6, "none": 0.0}
)


SHARDINGS = ("none", "zero1", "zero2", "zero3", "hybrid")


# ---------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------


def intra_bus_gbs(topo: Topology) -> float:
    if topo.intra_node == "none" or topo.gpus_per_node == 1:
        return float("inf")
    bidir = topo.intra_node_gbs or (
        DEFAULT_PCIE_BIDIR_GBS if topo.intra_node == "pcie" else 0.0
    )
    if bidir <= 0:
        raise ValueError(f"intra_node={topo.intra_node!r} needs intra_node_gbs")
    return bidir / 2.0 * LINK_EFFICIENCY[topo.intra_node]


def inter_bus_gbs(topo: Topology) -> float:
    if topo.nodes == 1:
        return float("inf")
    if topo.inter_node == "none" or not topo.inter_node_gbps:
        raise ValueError("multi-node topology needs inter_node and inter_node_gbps")
    return (
        topo.inter_node_gbps
        / 8.0
        / topo.gpus_per_node
        * LINK_EFFICIENCY[topo.inter_node]
    )


def bus_bandwidth_gbs(topology: Topology) -> float:
    """Achievable all-reduce bus bandwidth per GPU, GB/s (inf for one GPU).

    min(intra: bidirectional/2 * eff, inter: Gbit/s per node / 8 / gpus_per_node * eff).
    """
    return min(intra_bus_gbs(topology), inter_bus_gbs(topology))


def allreduce_seconds(
    nbytes: float, topology: Topology, sharding: str = "none"
) -> float:
    """Seconds for one all-reduce of ``nbytes`` over all GPUs of ``topology``.

    nccl-tests: time = 2(n-1)/n * S / busbw inside a node; across nodes see
    collective_seconds.  ZeRO-1/2 move the same volume as DDP; ZeRO-3 / hybrid
    1.5x (ZeRO paper §7).
    """
    if sharding not in SHARDINGS:
        raise ValueError(
            f"sharding={sharding!r}: expected one of {', '.join(SHARDINGS)}"
        )
    volume = nbytes * (1.5 if sharding in ("zero3", "hybrid") else 1.0)
    return collective_seconds(
        volume, topology.n_gpus, topology.gpus_per_node, topology, factor=2.0
    )


def collective_seconds(
    nbytes: float,
    ranks: int,
    local: int,
    topology: Topology,
    factor: float = 2.0,
    bucket_bytes: float = float("inf"),
) -> float:
    """Seconds for a hierarchical collective of ``nbytes`` per rank over ``ranks`` GPUs.

    The ``local`` ranks of a node reduce-scatter (and all-gather) over NVLink/PCIe,
    then each GPU exchanges its 1/local share with its peers in the other nodes over
    its share of the node's NICs (what NCCL's rings and trees achieve across nodes):
      factor * ((g-1)/g * S / B_intra + (N-1)/N * S/g / B_nic)   with g = local, N = ranks/g;
    factor 2 for an all-reduce, 1 for a reduce-scatter or an all-gather (nccl-tests
    PERFORMANCE.md).  Each bucket of ``bucket_bytes`` pays a launch latency
    2(g-1) * a_intra + 2 log2(N) * a_inter.
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    g = max(1, min(local, ranks))
    nodes = ranks / g
    seconds = 0.0
    latency = 0.0
    if g > 1:
        seconds += factor * (g - 1) / g * nbytes / (intra_bus_gbs(topology) * 1e9)
        latency += 2 * (g - 1) * ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6)
    if nodes > 1:
        seconds += (
            factor
            * (nodes - 1)
            / nodes
            * (nbytes / g)
            / (inter_bus_gbs(topology) * 1e9)
        )
        latency += (
            2 * math.log2(nodes) * NETWORK_LATENCY_S.get(topology.inter_node, 50e-6)
        )
    return seconds + latency * max(1, math.ceil(nbytes / bucket_bytes))


def all_to_all_seconds(
    nbytes: float, ranks: int, local: int, topology: Topology
) -> float:
    """Seconds for an all-to-all of ``nbytes`` per rank (MoE token dispatch or combine).

    Each rank keeps 1/ranks, sends (local-1)/ranks of its bytes over NVLink/PCIe and
    (ranks-local)/ranks over its NIC share, both at once (nccl-tests factor (n-1)/n).
    """
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    g = max(1, min(local, ranks))
    intra = (g - 1) / ranks * nbytes / (intra_bus_gbs(topology) * 1e9) if g > 1 else 0.0
    inter = (
        (ranks - g) / ranks * nbytes / (inter_bus_gbs(topology) * 1e9)
        if ranks > g
        else 0.0
    )
    latency = ALLREDUCE_LATENCY_S.get(topology.intra_node, 25e-6) + (
        NETWORK_LATENCY_S.get(topology.inter_node, 50e-6) if ranks > g else 0.0
    )
    return max(intra, inter) + latency


def scaling_efficiency(
    step_compute_s: float,
    comm_s: float,
    overlap: float = DEFAULT_OVERLAP,
    unoverlapped_s: float = 0.0,
) -> float:
    """t_compute / (t_compute + (1 - overlap) * t_comm + unoverlapped_s)."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"overlap={overlap}: expected 0..1")
    denom = step_compute_s + (1.0 - overlap) * comm_s + unoverlapped_s
    return 1.0 if denom <= 0 else step_compute_s / denom
