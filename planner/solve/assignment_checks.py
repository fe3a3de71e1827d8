"""Each job's assignment in a `planner solve` plan, checked against its offer and the scenario.

Split from `checker.py`, which checks the plan as a whole (its endpoints and shared limits) and calls
`check_assignment` for each job: the offer and its size, placement, market and price (with the scenario's
overrides), failure rates, restated inputs, memory, deadline and costs, from first principles. The batch
checker (`batch/checker.py`) shares its placement, size and stated-memory rules.
"""

from __future__ import annotations

import math

from planner.load.scenario import LoadedScenario
from planner.physics.hardware_shape import checkpoint_size_gib
from planner.schema.plan import BREAKDOWN_KEYS
from planner.schema.workload import Workload
from planner.solve.purchase_checks import PURCHASE_MARKETS, purchase_violations

REL_TOL = 1e-6


def _given(value, fallback):
    return fallback if value is None or value != value else float(value)


def close(a: float, b: float, rel: float = REL_TOL, abs_tol: float = 1e-9) -> bool:
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_tol)


def number(value) -> float | None:
    """Catalog cells are floats with NaN for missing; None stays None."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _matches(override, offer: dict, catalog) -> bool:
    return (
        (not override.provider or override.provider == offer["provider"])
        and (not override.region or override.region == offer["region"])
        and (
            not override.instance_type
            or override.instance_type == offer["instance_type"]
        )
        and (not override.gpu or catalog.gpu_matches(offer["gpu"], override.gpu))
    )


def _multipliers(loaded: LoadedScenario, offer: dict) -> tuple[float, float, float]:
    """(on-demand price, spot price, preemption rate) multipliers of every matching override."""
    on_demand = spot = preempt = 1.0
    for override in loaded.scenario.overrides:
        if _matches(override, offer, loaded.catalog):
            on_demand *= override.on_demand_price_multiplier
            spot *= override.spot_price_multiplier
            preempt *= override.preemption_rate_multiplier
    return on_demand, spot, preempt


def spot_settings(overrides, offer: dict, catalog) -> tuple[float, float, float]:
    """(correlation, mean capacity wait in hours, its coefficient of variation) of a spot offer: the provider's
    trace fit, unless a matching override sets them (the last one wins)."""
    provider = catalog.providers[offer["provider"]]
    correlation, wait = (
        provider.spot_correlation or 0.0,
        provider.spot_capacity_wait_h or 0.0,
    )
    spread = provider.spot_capacity_wait_cv or 1.0
    for override in overrides:
        if _matches(override, offer, catalog):
            correlation = (
                correlation
                if override.spot_correlation is None
                else override.spot_correlation
            )
            wait = (
                wait
                if override.spot_capacity_wait is None
                else override.spot_capacity_wait
            )
            spread = (
                spread
                if override.spot_capacity_wait_cv is None
                else override.spot_capacity_wait_cv
            )
    return correlation, wait, spread


def size_violations(
    workload: Workload, offer: dict, key: str, nodes: int, gpus: int
) -> list[str]:
    """The placement's size against the offer (whole nodes, a network to span them) and the workload's GPU range."""
    out = []
    if nodes < 1:
        out.append(f"{nodes} nodes")
    if gpus != nodes * int(offer["gpus_per_node"]):
        out.append(
            f"gpus {gpus} != {nodes} nodes x {int(offer['gpus_per_node'])} GPUs per node of {key}"
        )
    if not workload.gpus.min <= gpus <= workload.gpus.max:
        out.append(f"{gpus} GPUs outside gpus {workload.gpus.min}..{workload.gpus.max}")
    if nodes > 1 and offer["inter_node"] == "none":
        out.append(f"{nodes} nodes of {key}, which has no inter-node network")
    return out


def placement_violations(workload: Workload, offer: dict, catalog) -> list[str]:
    out = []
    fields = (
        ("providers", "provider"),
        ("regions", "region"),
        ("instance_types", "instance_type"),
    )
    for plural, column in fields:
        allowed = getattr(workload.allow, plural)
        if allowed and offer[column] not in allowed:
            out.append(
                f"{column} {offer[column]!r} is not in allow.{plural} {list(allowed)}"
            )
        if offer[column] in getattr(workload.forbid, plural):
            out.append(f"{column} {offer[column]!r} is in forbid.{plural}")

    def listed(queries) -> bool:
        return any(
            catalog.accelerator_matches(offer["gpu"], offer["gpus_per_node"], q)
            for q in queries
        )

    if workload.allow.gpus and not listed(workload.allow.gpus):
        out.append(
            f"GPU {offer['gpu']!r} is not in allow.gpus {list(workload.allow.gpus)}"
        )
    if listed(workload.forbid.gpus):
        out.append(f"GPU {offer['gpu']!r} is in forbid.gpus")
    return out


def stated_memory_floor(workload: Workload, gpus: int) -> float | None:
    """The per-GPU memory a workload states directly, before overhead (None with a model)."""
    need = workload.memory
    if need is None:
        return None
    if need.per_gpu is not None:
        return need.per_gpu
    states = need.model_states / gpus if need.shardable else need.model_states
    return states + need.activations


def check_assignment(
    loaded: LoadedScenario, a: dict, workload: Workload, offers: dict
) -> list[str]:
    scenario, catalog = loaded.scenario, loaded.catalog
    name = workload.name
    out: list[str] = []

    def bad(message: str) -> None:
        out.append(f"{name}: {message}")

    key = f"{a['provider']}/{a['region']}/{a['instance_type']}"
    offer = offers.get(key)
    if offer is None:
        bad(f"offer {key} is not in the scenario's catalogs")
        return out
    if a["gpu"] != offer["gpu"]:
        bad(f"GPU {a['gpu']!r} but offer {key} has {offer['gpu']!r}")
    if int(a["gpus_per_node"]) != int(offer["gpus_per_node"]):
        bad(
            f"gpus_per_node {a['gpus_per_node']} but offer {key} has {int(offer['gpus_per_node'])}"
        )
    nodes, gpus = int(a["nodes"]), int(a["gpus"])
    out += [f"{name}: {m}" for m in size_violations(workload, offer, key, nodes, gpus)]
    out += [f"{name}: {m}" for m in placement_violations(workload, offer, catalog)]

    # Market and price (with the scenario's overrides).
    on_demand_mult, spot_mult, preempt_mult = _multipliers(loaded, offer)
    market = a["market"]
    inputs = a["inputs"]
    if not workload.allows_market(market):
        bad(f"market {market} is ruled out by allow.markets/forbid.markets")
    spot_rate = 0.0
    on_spot = market in ("spot", "spot_fallback")
    if on_spot:
        base = number(offer["spot_usd_h"])
        if base is None:
            bad(f"{market}, but offer {key} has no spot price")
        if workload.interruption_tolerance == "none":
            bad(f"{market}, but interruption_tolerance is none")
        expected_price = None if base is None else base * spot_mult
        spot_rate = (number(offer["spot_preemption_per_h"]) or 0.0) * preempt_mult
        if (
            market == "spot_fallback"
        ):  # it falls back to the offer's on-demand price (cost-model §10)
            od = number(offer["on_demand_usd_h"])
            if od is None or not workload.time_budget:
                bad(
                    f"spot_fallback, but offer {key} has no on-demand price"
                    if od is None
                    else "spot_fallback, but the workload has no time budget to fall back against"
                )
            elif not close(
                inputs.get("fallback_price_per_node_h", math.nan), od * on_demand_mult
            ):
                bad(
                    f"fallback_price_per_node_h {inputs.get('fallback_price_per_node_h')} but the on-demand price "
                    f"of {key} (with overrides) is {od * on_demand_mult}"
                )
    elif market == "on_demand":
        base = number(offer["on_demand_usd_h"])
        if base is None:
            bad(f"on-demand, but offer {key} has no on-demand price")
        expected_price = None if base is None else base * on_demand_mult
    elif market in PURCHASE_MARKETS:
        problems, expected_price = purchase_violations(
            scenario, a, key, offer, on_demand_mult, close
        )
        for problem in problems:
            bad(problem)
    else:
        bad(f"unknown market {market!r}")
        expected_price = None
    if expected_price is not None and not close(
        inputs["price_per_node_h"], expected_price
    ):
        bad(
            f"price_per_node_h {inputs['price_per_node_h']} but the {market} price of {key} "
            f"(with overrides) is {expected_price}"
        )

    # Failure rate: preemption events (an event takes each node with a probability that varies from event to
    # event, so a share c of the events taking one node also take any other: a job on n nodes sees
    # λ·Σ_{i<n} (1 − c)/(1 − c + i·c) of them) plus hardware failures per GPU; a capacity wait after each event.
    hw = scenario.defaults.hardware_failure_per_gpu_h
    correlation, wait, spread = (
        spot_settings(scenario.overrides, offer, catalog)
        if on_spot
        else (0.0, 0.0, 1.0)
    )
    gang = math.fsum(
        1.0 if i == 0 else (1 - correlation) / (1 - correlation + i * correlation)
        for i in range(nodes)
    )
    if workload.interruption_tolerance == "stateless":
        gang = nodes  # each node is lost on its own and costs only its own item: every loss counts
    events = spot_rate * gang if on_spot else 0.0
    expected_rate = events + gpus * hw
    if not close(inputs["failure_rate_per_h"], expected_rate):
        bad(
            f"failure_rate_per_h {inputs['failure_rate_per_h']} != {spot_rate} x {gang} (events on {nodes} nodes at "
            f"correlation {correlation}) + {gpus} x {hw} = {expected_rate}"
        )
    if not close(inputs.get("preemption_events_per_h", 0.0), events):
        bad(
            f"preemption_events_per_h {inputs.get('preemption_events_per_h')} != {events}"
        )
    if not close(inputs.get("capacity_wait_h", 0.0), wait):
        bad(
            f"capacity_wait_h {inputs.get('capacity_wait_h')} but the offer's is {wait}"
        )
    if not close(inputs.get("capacity_wait_cv", 1.0), spread):
        bad(
            f"capacity_wait_cv {inputs.get('capacity_wait_cv')} but the offer's is {spread}"
        )

    storage = a.get("storage")
    if storage and not any(
        o.provider == a["provider"] and o.name == storage["name"]
        for o in catalog.storage
    ):
        bad(f"storage {storage['name']!r} is not one of {a['provider']}'s")

    # Inputs that restate the scenario and the provider.
    provider = catalog.providers[offer["provider"]]
    restated = {
        "interruption_tolerance": workload.interruption_tolerance,
        "restart_h": _restart_h(workload, a.get("storage"), catalog),
        "checkpoint_write_h": _checkpoint_write_h(workload, a.get("storage"), catalog),
        "time_budget_h": workload.time_budget,
        "deadline_confidence": scenario.defaults.deadline_confidence,
    }
    if not (a.get("purchase") or {}).get(
        "term_h"
    ):  # a term's billing: `purchase_violations`
        # the offer's own billing rule where its catalog row gives one, else the provider's
        restated["billing_granularity_h"] = _given(
            offer.get("billing_granularity_h"), provider.billing_granularity_h
        )
        restated["billing_minimum_h"] = _given(
            offer.get("billing_minimum_h"), provider.billing_minimum_h
        )
    for field, want in restated.items():
        got = inputs.get(field)
        same = (
            got == want
            if isinstance(want, str) or want is None or got is None
            else close(got, want)
        )
        if not same and not (isinstance(want, float) and math.isnan(want)):
            bad(f"inputs.{field} is {got!r}, the scenario says {want!r}")

    # Memory: the need with headroom fits the offer's GPU.
    memory = a["memory"]
    headroom = scenario.defaults.vram_headroom
    vram = float(offer["gpu_vram_gib"])
    if not close(memory["vram_gib"], vram):
        bad(
            f"memory.vram_gib {memory['vram_gib']} but {offer['gpu']} in {key} has {vram} GiB"
        )
    if memory["per_gpu_gib"] * (1 + headroom) > vram * (1 + 1e-9):
        bad(
            f"needs {memory['per_gpu_gib']:.2f} GiB per GPU (+{headroom:.0%} headroom) on {vram:.1f} GiB"
        )
    floor = stated_memory_floor(workload, gpus)
    if floor is not None and memory["per_gpu_gib"] < floor * (1 - 1e-9):
        bad(
            f"memory.per_gpu_gib {memory['per_gpu_gib']} is below the stated {floor} GiB"
        )

    # Deadline and cost arithmetic.
    expected = a["expected"]
    if (
        workload.time_budget is not None
        and expected["p_deadline"] < scenario.defaults.deadline_confidence
    ):
        bad(
            f"p_deadline {expected['p_deadline']:.4f} below deadline_confidence {scenario.defaults.deadline_confidence}"
        )
    _check_estimate_error(workload, scenario, inputs, expected, bad)
    parts = a["breakdown_usd"]
    if set(parts) != set(BREAKDOWN_KEYS):
        bad(f"breakdown parts {sorted(parts)}, expected {sorted(BREAKDOWN_KEYS)}")
    negative = [k for k, v in parts.items() if v < -1e-9]
    if negative:
        bad(f"negative cost parts {negative}")
    if not close(math.fsum(parts.values()), expected["cost_usd"], abs_tol=1e-9):
        bad(
            f"breakdown sums to {math.fsum(parts.values())} but expected.cost_usd is {expected['cost_usd']}"
        )
    if expected["cost_usd"] < 0 or expected["wall_h"] <= 0:
        bad(
            f"cost {expected['cost_usd']} / wall time {expected['wall_h']} out of range"
        )
    _check_risk(expected, inputs, a["market"], bad)
    return out


def _checkpoint_write_h(workload: Workload, storage: dict | None, catalog) -> float:
    """One checkpoint's write: stated, or its size over the storage's write rate (a stateless or non-resuming job
    writes none); an asynchronous one pauses the GPUs only for their copy to host memory, not restated here."""
    if workload.interruption_tolerance == "stateless":
        return 0.0
    if workload.checkpoint.write_time is not None:
        return workload.checkpoint.write_time
    if workload.interruption_tolerance != "checkpointed" or storage is None:
        return 0.0
    size = checkpoint_size_gib(workload, catalog) * 2**30
    if workload.checkpoint.asynchronous:
        return math.nan
    return size / (storage["write_gbs"] * 1e9) / 3600


def _restart_h(workload: Workload, storage: dict | None, catalog) -> float:
    """A (re)start: the stated overhead, reading the last checkpoint back and staging the data set onto new local
    disks, times the restart factor a calibration measured on that storage (an asynchronous checkpoint's write in
    flight is not restated here)."""
    if storage is None:
        return workload.restart_overhead
    if workload.checkpoint.asynchronous and workload.checkpoint.write_time is None:
        return math.nan
    factor = (
        catalog.calibration.storage_factors(storage["name"])[1]
        if catalog.calibration is not None
        else 1.0
    )
    return (
        workload.restart_overhead + storage["restore_h"] + storage["stage_h"]
    ) * factor


def _check_estimate_error(
    workload: Workload, scenario, inputs: dict, expected: dict, bad
) -> None:
    """The estimate's error the job carries is the scenario's (`published`: some spread about a median within a
    factor e; a stated share: that spread about the estimate), and P(deadline) is at most the chance that ε times
    the failure-free time, restart and work, is within the budget."""
    setting = (
        workload.estimate_error
        if workload.estimate_error is not None
        else scenario.defaults.estimate_error
    )
    error = inputs.get("estimate_error") or {"median": 0.0, "sigma": 0.0}
    median, sigma = error["median"], error["sigma"]
    if setting == "published" and not (sigma > 0 and abs(median) < 1):
        bad(f"inputs.estimate_error {error} is not a fit to published runs")
    elif setting != "published" and not (median == 0 and close(sigma, float(setting))):
        bad(f"inputs.estimate_error {error}, the scenario says a spread of {setting}")
    if workload.time_budget is None or sigma == 0:
        return
    floor = inputs["restart_h"] + inputs["work_h"]  # no run is faster
    z = (math.log(workload.time_budget / floor) - median) / sigma
    if expected["p_deadline"] > 0.5 * math.erfc(-z / math.sqrt(2)) + 1e-6:
        bad(
            f"p_deadline {expected['p_deadline']:.4f} above P(ε x {floor:.3f} h <= {workload.time_budget} h)"
        )


def _check_risk(expected: dict, inputs: dict, market: str, bad) -> None:
    """The preemption events are the failures' preemption share (on spot_fallback, of the spot phase's: at most
    that share of all), and each is followed by its mean wait for capacity (on spot_fallback at most that: the
    switch cuts the wait it comes in short)."""
    events, failures = expected.get("preemption_events"), expected["failures"]
    if events is None:  # a plan file written before the figures were reported
        return
    rate = inputs["failure_rate_per_h"]
    share = inputs.get("preemption_events_per_h", rate) / rate if rate > 0 else 0.0
    if market in ("on_demand", *PURCHASE_MARKETS) and events != 0:
        bad(f"expected.preemption_events {events} on {market}")
    elif market == "spot" and not close(events, failures * share):
        bad(
            f"expected.preemption_events {events}, but {failures} failures of which a share {share} are events"
        )
    elif not -1e-9 <= events <= failures * share * (1 + 1e-9) + 1e-12:
        bad(f"expected.preemption_events {events} out of range for {failures} failures")
    full = events * inputs.get("capacity_wait_h", 0.0)
    if market == "spot_fallback":  # the switch may cut the wait it comes in short
        if not -1e-9 <= expected["waiting_h"] <= full * (1 + 1e-9) + 1e-12:
            bad(
                f"expected.waiting_h {expected['waiting_h']} out of range for {events} events each waiting "
                f"{inputs.get('capacity_wait_h', 0.0)} h"
            )
    elif not close(expected["waiting_h"], full):
        bad(
            f"expected.waiting_h {expected['waiting_h']}, but {events} events each wait "
            f"{inputs.get('capacity_wait_h', 0.0)} h"
        )
