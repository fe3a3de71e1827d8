"""Storage that feeds the GPUs: how fast a job's data and checkpoints move on each storage option, and what
that adds to its time and cost (docs/storage.md).

Everything here is bytes over bandwidth. A storage option delivers `read_mbs`/`write_mbs` per node (its own
disk, volume or client) or per provisioned TiB (a shared file system, capped per node and in all); the nodes of
a job read and write in parallel, so a checkpoint sharded over n nodes is written at the aggregate rate.
Local NVMe is lost with its node: its data set is staged again from the provider's persistent store (the
option's *backing*) at every start, and checkpoints go to that store. A persistent volume or file system is
filled once, at the first start. The data set is read `epochs` times; where storage cannot keep up the job is
data-bound and runs at what the storage delivers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.schema.units import HOURS_PER_MONTH

GIB = 2**30
MB = 1e6
TIB_GIB = 1024.0
IN_FLIGHT = 64
"""Object reads a node's data loaders keep in flight (8 GPUs x 8 DataLoader workers): an assumption."""
REQUEST_S = 0.03
"""An object store's time to first byte of a small object: "for small requests (for example, less than 512 KB) ...
median latencies are often in the tens of milliseconds" (AWS, Optimizing Amazon S3 performance, Timeouts and
retries for latency-sensitive applications)."""
HOST_COPY_GBS = 25.0
"""GB/s per GPU at which an asynchronous checkpoint snapshots its shard to host memory (PCIe 4/5 device to
pinned host copies measure 20-25 and 40-50 GB/s: the lower one, MEMORY-AND-SPEED links table)."""


@dataclass(frozen=True)
class StorageNeeds:
    """What one workload asks of storage, whatever the option: the GiB of one checkpoint and of its data set,
    how often it reads the data, and the checkpoint rules it states."""

    checkpoint_gib: float  # one checkpoint (0: it writes none)
    kept: int  # checkpoints kept
    data_gib: float
    epochs: float
    sample_gib: (
        float | None
    )  # one object read from a bucket (None: large shards, read at full rate)
    restores: bool  # a restart reads the last checkpoint back
    restart_h: float  # the stated fixed part of a (re)start: provisioning, image, process start
    write_time_h: float | None  # stated: overrides the bandwidth's
    asynchronous: bool


def needs_of(workload, checkpoint_gib: float) -> StorageNeeds:
    """`workload`'s storage needs (`checkpoint_gib`: `hardware_shape.checkpoint_size_gib`)."""
    tolerance = workload.interruption_tolerance
    checkpointed = tolerance == "checkpointed"
    return StorageNeeds(
        checkpoint_gib=checkpoint_gib if checkpointed else 0.0,
        kept=workload.checkpoint.keep,
        data_gib=workload.data.size,
        epochs=workload.data.epochs,
        sample_gib=workload.data.sample_size,
        restores=checkpointed,
        restart_h=workload.restart_overhead,
        write_time_h=0.0
        if tolerance == "stateless"
        else workload.checkpoint.write_time,
        asynchronous=workload.checkpoint.asynchronous,
    )


def _aggregate_mbs(per, scope, nodes, provisioned_gib, node_max, most) -> np.ndarray:
    """MB/s all n nodes get together: n times a node's for per-node options, per TiB times the provisioned TiB
    for a file system, within its per-node and overall caps."""
    per_tib = scope == "tib"
    rate = np.where(per_tib, per * provisioned_gib / TIB_GIB, per * nodes)
    rate = np.minimum(rate, np.where(np.isnan(node_max), np.inf, node_max * nodes))
    return np.minimum(rate, np.where(np.isnan(most), np.inf, most))


def _object_mbs(needs: StorageNeeds, src: dict, nodes: np.ndarray) -> np.ndarray:
    """What n nodes read of small objects from a bucket: each request waits REQUEST_S before its bytes flow,
    IN_FLIGHT at a time per node (inf where the option is not an object store or the reads are large)."""
    if not needs.sample_gib:
        return np.full(len(nodes), np.inf)
    rate = IN_FLIGHT * needs.sample_gib * GIB / MB / REQUEST_S * nodes
    return np.where(src["storage_class"] == "object", rate, np.inf)


def _hours(gib, mbs) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gib > 0, gib * GIB / (mbs * MB) / 3600.0, 0.0)


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows numbered by their values in `columns`, in order of first appearance (a groupby's `ngroup`), and each
    number's first row."""
    code = numbered(
        np.zeros(len(columns[0]), dtype=np.int64),
        (pd.factorize(column, use_na_sentinel=False)[0] for column in columns),
    )
    return code, first_rows(code)


def numbered(number: np.ndarray, codes) -> np.ndarray:
    """Rows numbered by `number` and each of `codes` (small integer codes of columns): equal in all, the same
    number, in order of first appearance (a groupby's `ngroup`), by a mixed radix over the codes."""
    size = int(number.max()) + 1
    for code in codes:
        values = int(code.max()) + 1
        if size * values >= 2**62:  # renumber before the mixed radix overflows
            number = pd.factorize(number)[0]
            size = int(number.max()) + 1
        number, size = number * values + code, size * values
    return pd.factorize(number)[0]


def first_rows(code: np.ndarray) -> np.ndarray:
    """Each number's first row, of rows numbered in order of first appearance (`numbered`): where a row's number
    passes every one before it (`np.unique`'s first indices, without its sort)."""
    seen = np.maximum.accumulate(code)
    return np.flatnonzero(np.concatenate(([True], seen[1:] > seen[:-1])))


def storage_columns(
    needs: StorageNeeds,
    options: pd.DataFrame | dict[str, np.ndarray],
    option: np.ndarray,
    nodes: np.ndarray,
    gpus_per_node: np.ndarray,
    cache_mbs: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per row (`option`: its storage option's position in `options`, the catalog's `storage_table` or its
    `storage_arrays`, whose `backing` names where a non-persistent option's checkpoints persist and `origin`
    where a data set is copied from): the storage's columns of a candidate. `checkpoint_h` C and `restart_h` R enter the cost model; `read_h` (all epochs at the storage's
    read rate) caps W from below and `load_h` (filling a persistent volume once) adds to it; `storage_h` is its
    price per wall-clock hour. `cache_mbs`: per row, a node's local disk read rate where the data set fits on it
    (0: it does not), which serves every epoch after the first."""
    if isinstance(options, pd.DataFrame):
        options = {c: options[c].to_numpy() for c in options.columns}
    option = np.asarray(option, dtype=np.int64)
    nodes = np.broadcast_to(np.asarray(nodes, dtype=float), option.shape)
    gpus_per_node = np.broadcast_to(
        np.asarray(gpus_per_node, dtype=float), option.shape
    )
    cache = (
        np.zeros(option.shape)
        if cache_mbs is None
        else np.broadcast_to(np.asarray(cache_mbs, dtype=float), option.shape)
    )
    # every figure is the row's own: work each distinct (option, nodes, node size, cache) out once
    code, first = distinct_rows(option, nodes, gpus_per_node, cache)
    if len(first) < len(option):
        figures = _storage_columns(
            needs,
            options,
            option[first],
            nodes[first],
            gpus_per_node[first],
            cache[first],
        )
        return {c: v[code] for c, v in figures.items()}
    return _storage_columns(needs, options, option, nodes, gpus_per_node, cache)


def _storage_columns(
    needs: StorageNeeds,
    options: dict[str, np.ndarray],
    option: np.ndarray,
    nodes: np.ndarray,
    gpus_per_node: np.ndarray,
    cache_mbs: np.ndarray,
) -> dict[str, np.ndarray]:
    o = {c: v[option] for c, v in options.items()}
    b = {c: v[o["backing"]] for c, v in options.items()}  # where checkpoints persist
    src = {c: v[o["origin"]] for c, v in options.items()}  # where a data set comes from
    nodes = np.asarray(nodes, dtype=float)
    per_node = ~o["shared"].astype(bool)
    kept = needs.checkpoint_gib * needs.kept
    # a per-node volume holds the data set on each node and its share of the checkpoints
    stored = np.where(
        o["persistent"].astype(bool),
        kept + needs.data_gib * np.where(per_node, nodes, 1.0),
        0.0,
    )
    held = np.where(
        per_node, stored / nodes, stored
    )  # one volume's, or the file system's
    provisioned = np.maximum(held, o["min_gib"].astype(float))
    # sized for bandwidth: enough TiB that the file system serves every node's client at its most
    for_clients = (
        o["node_max_mbs"].astype(float) * nodes / o["read_mbs"].astype(float) * TIB_GIB
    )
    provisioned = np.where(
        o["sized_for_bandwidth"].astype(bool),
        np.maximum(provisioned, np.nan_to_num(for_clients)),
        provisioned,
    )
    home_size = kept + needs.data_gib
    rates = {
        name: _aggregate_mbs(
            of[f"{way}_mbs"].astype(float),
            of["scope"],
            nodes,
            np.maximum(size, of["min_gib"].astype(float)),
            of["node_max_mbs"].astype(float),
            of["max_mbs"].astype(float),
        )
        for name, of, way, size in (
            ("read", o, "read", provisioned),
            ("write", o, "write", provisioned),
            ("home_read", b, "read", home_size),
            ("home_write", b, "write", home_size),
            ("origin_read", src, "read", home_size),
        )
    }
    for name, of in (("read", o), ("home_read", b), ("origin_read", src)):
        rates[name] = np.minimum(rates[name], _object_mbs(needs, of, nodes))
    persistent = o["persistent"].astype(bool)
    # a calibration's measured checkpoint time over the model's: the write rate the option delivered
    delivered = np.asarray(o.get("checkpoint_factor", 1.0), dtype=float)
    write_mbs = np.where(persistent, rates["write"], rates["home_write"]) / delivered
    restore_mbs = np.where(persistent, rates["read"], rates["home_read"])
    gib = needs.checkpoint_gib
    if needs.write_time_h is not None:
        checkpoint_h = np.full(len(option), needs.write_time_h)
        lag_h = np.zeros(len(option))
    elif needs.asynchronous:
        # the GPUs pause only to copy their shard to host memory; the write runs behind, so a failure can
        # lose the checkpoint in flight: its write counts in every restart
        checkpoint_h = _hours(
            np.full(len(option), gib), nodes * gpus_per_node * HOST_COPY_GBS * 1e3
        )
        lag_h = _hours(np.full(len(option), gib), write_mbs)
    else:
        checkpoint_h = _hours(np.full(len(option), gib), write_mbs)
        lag_h = np.zeros(len(option))
    restore_h = _hours(
        np.full(len(option), gib if needs.restores else 0.0), restore_mbs
    )
    data = np.full(len(option), needs.data_gib)
    # local disks lose the data set with the node: every start stages it again from the backing store
    # (each node its own copy); a persistent volume is filled once from the origin, objects are read where
    # they are
    stage_h = np.where(persistent, 0.0, _hours(data * nodes, rates["home_read"]))
    filled = persistent & (o["storage_class"] != "object")
    fill_mbs = np.minimum(rates["write"], rates["origin_read"])
    load_h = np.where(
        filled, _hours(data * np.where(per_node, nodes, 1.0), fill_mbs), 0.0
    )
    read_h = _hours(data * min(needs.epochs, 1.0), rates["read"])
    if needs.epochs > 1:
        # the loader keeps the first epoch on the node's local disk where it fits, and reads the rest from there
        read_h = read_h + _hours(
            data * (needs.epochs - 1), np.maximum(rates["read"], cache_mbs * nodes)
        )
    # an option bills what it provisions (one volume per node, or one); a local disk holds the data set on
    # each node (most come with the node, at 0), and its data set and checkpoints are kept in the backing store
    billed = np.where(per_node, provisioned * nodes, provisioned)
    usd_h = (
        np.where(persistent, billed, data * nodes)
        * o["usd_per_gib_month"].astype(float)
        + np.where(persistent, 0.0, home_size * b["usd_per_gib_month"].astype(float))
    ) / HOURS_PER_MONTH
    return {
        "checkpoint_h": checkpoint_h,
        "restart_h": (needs.restart_h + restore_h + stage_h + lag_h)
        * np.asarray(o.get("restart_factor", 1.0), dtype=float),
        "restore_h": restore_h,
        "stage_h": stage_h,
        "load_h": load_h,
        "read_h": read_h,
        "read_gbs": rates["read"] / 1e3,
        "write_gbs": write_mbs / 1e3,
        "provisioned_gib": np.where(persistent, provisioned, 0.0),
        "storage_h": usd_h,
    }


def storage_work_h(compute_h, read_h, load_h):
    """W with storage: the GPUs' own time or the time to read the data, whichever is longer (a prefetching loader
    overlaps the two), plus filling a persistent volume once."""
    return np.maximum(compute_h, read_h) + load_h


def data_bound_share(compute_h: float, read_h: float) -> float:
    """The share of the run's reading time the GPUs wait on data (0: the GPUs are the bottleneck)."""
    if not read_h > compute_h:
        return 0.0
    return 1.0 - compute_h / read_h if math.isfinite(read_h) else 1.0
