"""Each constraint family of the `planner batch` CP-SAT model on its own, in accept/reject pairs.

A micro-model is a 2-4 row candidate table, the decision variables as `build_batch_model`
creates them (picks; a start per run, whose domain is [release, due - shortest duration];
`scheduled` per optional run; nodes bought per pool), one family, and the variables that family
leaves free fixed to the case at hand (`fix`). Steps are hours; runs are required and may use
steps [0, 8) unless a test says otherwise.
"""

from __future__ import annotations

import pytest

from families.factories import (
    assert_accepts,
    assert_every_family_tested,
    assert_rejects,
    batch_model,
    fix,
    pool,
    run_candidate,
    run_candidates,
    run_info,
)
from planner.batch.model import (
    CONSTRAINT_FAMILIES,
    BatchLimits,
    add_budgets,
    add_energy_cuts,
    add_gpu_quotas,
    add_node_limits,
    add_one_candidate_per_run,
    add_precedence,
    add_reservation_capacity,
    add_windows,
    build_batch_model,
)

FAMILY_TESTS = {
    add_one_candidate_per_run: "test_one_candidate_per_run_",
    add_windows: "test_window_",
    add_precedence: "test_precedence_",
    add_gpu_quotas: "test_gpu_quota_",
    add_node_limits: "test_node_limit_",
    add_reservation_capacity: "test_reservation_capacity_",
    add_energy_cuts: "test_energy_cut_",
    add_budgets: "test_budget_",
}
"""Every family and the prefix of its tests; `test_every_family_has_accept_and_reject_tests` holds them to it."""

P5 = "aws/us-east-1/p5.48xlarge"


def micro(
    family, rows, runs=None, pools=(), limits: BatchLimits = BatchLimits(), **fixed
):
    """The variables over `rows`, `family` alone, then `fix(**fixed)` (picks, starts, scheduled, bought)."""
    m = batch_model(rows, runs, pools)
    family(m, limits)
    fix(m, **fixed)
    return m


def test_every_family_has_accept_and_reject_tests():
    assert_every_family_tested(CONSTRAINT_FAMILIES, FAMILY_TESTS, globals())


def test_micro_model_variables_are_the_builders():
    """The factory's variables (names and domains) are what `build_batch_model` makes."""
    rows = [
        run_candidate("a", duration_steps=3),
        run_candidate("a", duration_steps=2, pool=0),
        run_candidate("b", duration_steps=4),
    ]
    runs = [
        run_info("a", release=1, due=7),
        run_info("b", due=6, required=False, after=("a",)),
    ]
    pools = [pool(min_nodes=1, max_nodes=3)]
    m = batch_model(rows, runs, pools)
    real = build_batch_model(run_candidates(*rows), runs, pools, BatchLimits(), 8)

    def described(model, variables):
        return [
            (v.name, list(model.model.proto.variables[v.index].domain))
            if not isinstance(v, int)
            else v
            for v in variables
        ]

    for part in (
        lambda x: x.pick,
        lambda x: list(x.start.values()),
        lambda x: list(x.scheduled.values()),
        lambda x: x.bought,
    ):
        assert described(m, part(m)) == described(real, part(real))
    assert m.cands.equals(real.cands) and m.runs == real.runs and m.pools == real.pools


# ---------------------------------------------------------------- add_one_candidate_per_run

# a is required, b optional; each has two candidates
ONE = [
    run_candidate("a"),
    run_candidate("a", provider="gcp"),
    run_candidate("b"),
    run_candidate("b", provider="gcp"),
]
ONE_RUNS = [run_info("a"), run_info("b", required=False)]


def test_one_candidate_per_run_accepts_the_required_run_once_and_the_optional_one_left_out():
    assert_accepts(
        micro(
            add_one_candidate_per_run,
            ONE,
            ONE_RUNS,
            picks=("a1",),
            scheduled={"b": False},
        )
    )


def test_one_candidate_per_run_accepts_the_optional_run_scheduled_on_one_candidate():
    assert_accepts(
        micro(
            add_one_candidate_per_run,
            ONE,
            ONE_RUNS,
            picks=("a1", "b2"),
            scheduled={"b": True},
        )
    )


def test_one_candidate_per_run_rejects_a_required_run_left_out():
    assert_rejects(micro(add_one_candidate_per_run, ONE, ONE_RUNS, picks=("b1",)))


def test_one_candidate_per_run_rejects_a_required_run_on_two_candidates():
    assert_rejects(micro(add_one_candidate_per_run, ONE, ONE_RUNS, picks=("a1", "a2")))


def test_one_candidate_per_run_rejects_an_optional_run_on_two_candidates():
    assert_rejects(
        micro(add_one_candidate_per_run, ONE, ONE_RUNS, picks=("a1", "b1", "b2"))
    )


def test_one_candidate_per_run_rejects_an_optional_run_scheduled_without_a_candidate():
    assert_rejects(
        micro(
            add_one_candidate_per_run,
            ONE,
            ONE_RUNS,
            picks=("a1",),
            scheduled={"b": True},
        )
    )


def test_one_candidate_per_run_rejects_a_candidate_of_an_optional_run_not_scheduled():
    assert_rejects(
        micro(
            add_one_candidate_per_run,
            ONE,
            ONE_RUNS,
            picks=("a1", "b1"),
            scheduled={"b": False},
        )
    )


# ---------------------------------------------------------------- add_windows

# run a may use steps [1, 6): 2 or 4 steps long, so its start ranges over [1, 4]
DUE = [run_candidate("a", duration_steps=2), run_candidate("a", duration_steps=4)]
DUE_RUNS = [run_info("a", release=1, due=6)]


def test_window_accepts_a_4_step_run_ending_at_its_due():
    assert_accepts(micro(add_windows, DUE, DUE_RUNS, picks=("a2",), starts={"a": 2}))


def test_window_rejects_a_4_step_run_ending_one_step_after_its_due():
    # start 3 is inside the start's domain (the 2-step candidate may start there): the family rejects it
    assert_rejects(micro(add_windows, DUE, DUE_RUNS, picks=("a2",), starts={"a": 3}))


def test_window_accepts_a_start_at_the_release():
    assert_accepts(micro(add_windows, DUE, DUE_RUNS, picks=("a1",), starts={"a": 1}))


def test_window_rejects_a_start_before_the_release():
    # held by the start variable's domain [release, ...] as `build_batch_model` creates it, not by a
    # constraint of `add_windows` (which adds only the due and the pool/candidate bounds)
    assert_rejects(micro(add_windows, DUE, DUE_RUNS, picks=("a1",), starts={"a": 0}))


# run b: 2 steps on the reservation (term steps [2, 7)) or on demand
TERM = [run_candidate("b", pool=0), run_candidate("b")]
TERM_POOLS = [pool(start=2, end=7)]


@pytest.mark.parametrize("step", [2, 5])
def test_window_accepts_a_reserved_run_inside_the_term(step):
    assert_accepts(
        micro(add_windows, TERM, pools=TERM_POOLS, picks=("b1",), starts={"b": step})
    )


@pytest.mark.parametrize("step", [1, 6])  # starts before the term; ends at 8, after it
def test_window_rejects_a_reserved_run_outside_the_term(step):
    assert_rejects(
        micro(add_windows, TERM, pools=TERM_POOLS, picks=("b1",), starts={"b": step})
    )


def test_window_accepts_an_on_demand_run_outside_the_reservation_term():
    assert_accepts(
        micro(add_windows, TERM, pools=TERM_POOLS, picks=("b2",), starts={"b": 0})
    )


# run c: one candidate narrowed to starts [2, 3] (as the search's neighbourhoods narrow them), one not
NARROWED = [run_candidate("c", first_start=2, last_start=3), run_candidate("c")]


@pytest.mark.parametrize("step", [2, 3])
def test_window_accepts_a_start_inside_the_candidates_own_start_range(step):
    assert_accepts(micro(add_windows, NARROWED, picks=("c1",), starts={"c": step}))


@pytest.mark.parametrize("step", [1, 4])
def test_window_rejects_a_start_outside_the_candidates_own_start_range(step):
    assert_rejects(micro(add_windows, NARROWED, picks=("c1",), starts={"c": step}))


def test_window_accepts_any_start_for_a_candidate_not_narrowed_beside_a_narrowed_one():
    assert_accepts(micro(add_windows, NARROWED, picks=("c2",), starts={"c": 6}))


# ---------------------------------------------------------------- add_precedence

# b waits for a; a takes 2 or 4 steps
CHAIN = [
    run_candidate("a", duration_steps=2),
    run_candidate("a", duration_steps=4),
    run_candidate("b"),
]
CHAIN_RUNS = [run_info("a"), run_info("b", after=("a",))]


def test_precedence_accepts_a_run_starting_as_its_predecessor_ends():
    assert_accepts(
        micro(
            add_precedence,
            CHAIN,
            CHAIN_RUNS,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 2},
        )
    )


def test_precedence_rejects_a_run_starting_before_its_predecessor_ends():
    assert_rejects(
        micro(
            add_precedence,
            CHAIN,
            CHAIN_RUNS,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 1},
        )
    )


def test_precedence_accepts_the_wait_for_the_chosen_4_step_predecessor():
    assert_accepts(
        micro(
            add_precedence,
            CHAIN,
            CHAIN_RUNS,
            picks=("a2", "b1"),
            starts={"a": 0, "b": 4},
        )
    )


def test_precedence_rejects_a_start_that_only_a_2_step_predecessor_would_allow():
    assert_rejects(
        micro(
            add_precedence,
            CHAIN,
            CHAIN_RUNS,
            picks=("a2", "b1"),
            starts={"a": 0, "b": 2},
        )
    )


OPTIONAL_CHAIN = [
    run_info("a", required=False),
    run_info("b", after=("a",), required=False),
]


def test_precedence_accepts_an_optional_predecessor_scheduled_without_its_follower():
    assert_accepts(
        micro(
            add_precedence,
            CHAIN,
            OPTIONAL_CHAIN,
            picks=("a1",),
            scheduled={"a": True, "b": False},
        )
    )


def test_precedence_rejects_an_optional_follower_scheduled_without_its_predecessor():
    assert_rejects(
        micro(
            add_precedence,
            CHAIN,
            OPTIONAL_CHAIN,
            picks=("b1",),
            scheduled={"a": False, "b": True},
        )
    )


def test_precedence_accepts_any_start_of_an_optional_follower_left_out():
    # b is not scheduled, so its start (before a ends) means nothing
    m = micro(
        add_precedence,
        CHAIN,
        OPTIONAL_CHAIN,
        picks=("a1",),
        starts={"a": 2, "b": 0},
        scheduled={"a": True, "b": False},
    )
    assert_accepts(m)


def test_precedence_rejects_an_optional_follower_scheduled_before_its_predecessor_ends():
    m = micro(
        add_precedence,
        CHAIN,
        OPTIONAL_CHAIN,
        picks=("a1", "b1"),
        starts={"a": 2, "b": 0},
        scheduled={"a": True, "b": True},
    )
    assert_rejects(m)


REQUIRED_AFTER_OPTIONAL = [run_info("a", required=False), run_info("b", after=("a",))]


def test_precedence_accepts_a_required_run_after_its_optional_predecessor_scheduled():
    m = micro(
        add_precedence,
        CHAIN,
        REQUIRED_AFTER_OPTIONAL,
        picks=("a1", "b1"),
        starts={"a": 0, "b": 2},
        scheduled={"a": True},
    )
    assert_accepts(m)


def test_precedence_rejects_a_required_run_whose_optional_predecessor_is_left_out():
    assert_rejects(
        micro(
            add_precedence,
            CHAIN,
            REQUIRED_AFTER_OPTIONAL,
            picks=("b1",),
            scheduled={"a": False},
        )
    )


def test_precedence_accepts_a_run_waiting_for_a_run_outside_the_model():
    # the search solves subsets of the runs: a predecessor not among them is not waited for
    runs = [run_info("a"), run_info("b", after=("elsewhere",))]
    assert_accepts(
        micro(add_precedence, CHAIN, runs, picks=("a1", "b1"), starts={"a": 0, "b": 0})
    )


# ---------------------------------------------------------------- add_gpu_quotas

# a, b and c each 8 H100s on AWS for 2 steps; c may also run on GCP
QUOTA = [
    run_candidate("a"),
    run_candidate("b"),
    run_candidate("c"),
    run_candidate("c", provider="gcp"),
]


def test_gpu_quota_accepts_two_8_gpu_runs_back_to_back_under_a_quota_of_8():
    m = micro(
        add_gpu_quotas,
        QUOTA,
        limits=BatchLimits(gpu_quotas={"aws": 8}),
        picks=("a1", "b1", "c2"),
        starts={"a": 0, "b": 2, "c": 0},
    )  # c on GCP overlaps a: not counted
    assert_accepts(m)


def test_gpu_quota_rejects_two_8_gpu_runs_overlapping_one_step_under_a_quota_of_8():
    m = micro(
        add_gpu_quotas,
        QUOTA,
        limits=BatchLimits(gpu_quotas={"aws": 8}),
        picks=("a1", "b1", "c2"),
        starts={"a": 0, "b": 1, "c": 0},
    )
    assert_rejects(m)


def test_gpu_quota_accepts_16_of_16_gpus_at_once():
    m = micro(
        add_gpu_quotas,
        QUOTA,
        limits=BatchLimits(gpu_quotas={"aws": 16}),
        picks=("a1", "b1", "c2"),
        starts={"a": 0, "b": 0, "c": 0},
    )
    assert_accepts(m)


def test_gpu_quota_rejects_24_of_16_gpus_at_once():
    m = micro(
        add_gpu_quotas,
        QUOTA,
        limits=BatchLimits(gpu_quotas={"aws": 16}),
        picks=("a1", "b1", "c1"),
        starts={"a": 0, "b": 1, "c": 1},
    )  # all three at step 1
    assert_rejects(m)


# a and b each on 8 H100s or 8 A100s on AWS
GPU_KINDS = [
    run_candidate("a"),
    run_candidate("a", gpu="A100-80GB", gpu_family="A100"),
    run_candidate("b"),
    run_candidate("b", gpu="A100-80GB", gpu_family="A100"),
]


# a family, any case, or a GPU name
@pytest.mark.parametrize("key", ["aws/H100", "aws/h100", "aws/H100-SXM"])
def test_gpu_quota_by_gpu_accepts_8_h100s_beside_8_a100s_at_once(key):
    m = micro(
        add_gpu_quotas,
        GPU_KINDS,
        limits=BatchLimits(gpu_quotas={key: 8}),
        picks=("a1", "b2"),
        starts={"a": 0, "b": 0},
    )
    assert_accepts(m)


@pytest.mark.parametrize("key", ["aws/H100", "aws/h100", "aws/H100-SXM"])
def test_gpu_quota_by_gpu_rejects_16_of_8_h100s_at_once(key):
    m = micro(
        add_gpu_quotas,
        GPU_KINDS,
        limits=BatchLimits(gpu_quotas={key: 8}),
        picks=("a1", "b1"),
        starts={"a": 0, "b": 0},
    )
    assert_rejects(m)


def test_gpu_quota_is_left_out_when_one_candidate_per_run_cannot_exceed_it():
    """Not a rule of its own: the cumulative is only added when the largest candidate of each run
    together exceed the quota (`_can_bind`), so the family alone lets two candidates of ONE run
    (8 + 8 GPUs at once) past a quota of 8; `add_one_candidate_per_run` rules that assignment out.
    The same holds for `add_node_limits` and the quota cuts of `add_energy_cuts`."""
    rows = [run_candidate("a"), run_candidate("a", market="spot")]
    alone = micro(
        add_gpu_quotas,
        rows,
        limits=BatchLimits(gpu_quotas={"aws": 8}),
        picks=("a1", "a2"),
    )
    assert_accepts(alone)
    add_one_candidate_per_run(alone, BatchLimits())
    assert_rejects(alone)


# ---------------------------------------------------------------- add_node_limits

# a and b each on one p5 node for 2 steps; a may also run on another offer
NODES = [
    run_candidate("a"),
    run_candidate("a", offer_key="aws/us-east-1/p4d.24xlarge"),
    run_candidate("b"),
]


def test_node_limit_accepts_two_1_node_runs_back_to_back_under_a_limit_of_1():
    m = micro(
        add_node_limits,
        NODES,
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a1", "b1"),
        starts={"a": 0, "b": 2},
    )
    assert_accepts(m)


def test_node_limit_rejects_two_1_node_runs_overlapping_under_a_limit_of_1():
    m = micro(
        add_node_limits,
        NODES,
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a1", "b1"),
        starts={"a": 0, "b": 1},
    )
    assert_rejects(m)


def test_node_limit_accepts_a_node_of_another_offer_beside_a_full_limit():
    m = micro(
        add_node_limits,
        NODES,
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a2", "b1"),
        starts={"a": 0, "b": 0},
    )
    assert_accepts(m)


def test_node_limit_from_the_catalog_accepts_1_node_of_max_nodes_1_at_a_time():
    rows = [dict(r, max_nodes=1.0) for r in NODES]
    assert_accepts(
        micro(add_node_limits, rows, picks=("a1", "b1"), starts={"a": 0, "b": 2})
    )


def test_node_limit_from_the_catalog_rejects_2_nodes_of_max_nodes_1_at_once():
    rows = [dict(r, max_nodes=1.0) for r in NODES]
    assert_rejects(
        micro(add_node_limits, rows, picks=("a1", "b1"), starts={"a": 0, "b": 1})
    )


# a on one p5 node on demand or on the p5 reservation; b on one p5 node on demand
RESERVED_ASIDE = [run_candidate("a"), run_candidate("a", pool=0), run_candidate("b")]


def test_node_limit_accepts_a_reserved_node_beside_a_full_on_demand_limit():
    m = micro(
        add_node_limits,
        RESERVED_ASIDE,
        pools=[pool()],
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a2", "b1"),
        starts={"a": 0, "b": 0},
    )
    assert_accepts(m)


def test_node_limit_rejects_a_second_on_demand_node_beside_a_full_limit():
    m = micro(
        add_node_limits,
        RESERVED_ASIDE,
        pools=[pool()],
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a1", "b1"),
        starts={"a": 0, "b": 0},
    )
    assert_rejects(m)


# a on one p5 node on demand or on spot; b on one p5 spot node
MARKETS = [
    run_candidate("a"),
    run_candidate("a", market="spot"),
    run_candidate("b", market="spot"),
]
PER_MARKET = BatchLimits(node_limits={P5: 1}, node_limits_per_market=True)


def test_node_limit_per_market_accepts_1_on_demand_and_1_spot_node_at_once_under_a_limit_of_1():
    assert_accepts(
        micro(
            add_node_limits,
            MARKETS,
            limits=PER_MARKET,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 0},
        )
    )


def test_node_limit_per_market_rejects_2_spot_nodes_at_once_under_a_limit_of_1():
    assert_rejects(
        micro(
            add_node_limits,
            MARKETS,
            limits=PER_MARKET,
            picks=("a2", "b1"),
            starts={"a": 0, "b": 0},
        )
    )


def test_node_limit_across_markets_rejects_1_on_demand_and_1_spot_node_at_once_under_a_limit_of_1():
    m = micro(
        add_node_limits,
        MARKETS,
        limits=BatchLimits(node_limits={P5: 1}),
        picks=("a1", "b1"),
        starts={"a": 0, "b": 0},
    )
    assert_rejects(m)


# ---------------------------------------------------------------- add_reservation_capacity

# a and b each 2 steps on the reservation (term [0, 8)), on 1 or 2 nodes, or on demand
POOLED = [
    run_candidate("a", pool=0),
    run_candidate("a", pool=0, nodes=2, gpus=16),
    run_candidate("a"),
    run_candidate("b", pool=0),
]


def test_reservation_capacity_accepts_two_runs_back_to_back_on_1_node_bought():
    m = micro(
        add_reservation_capacity,
        POOLED,
        pools=[pool()],
        picks=("a1", "b1"),
        starts={"a": 0, "b": 2},
        bought=[1],
    )
    assert_accepts(m)


def test_reservation_capacity_rejects_two_runs_overlapping_on_1_node_bought():
    m = micro(
        add_reservation_capacity,
        POOLED,
        pools=[pool()],
        picks=("a1", "b1"),
        starts={"a": 0, "b": 1},
        bought=[1],
    )
    assert_rejects(m)


def test_reservation_capacity_accepts_two_runs_overlapping_on_2_nodes_bought():
    m = micro(
        add_reservation_capacity,
        POOLED,
        pools=[pool()],
        picks=("a1", "b1"),
        starts={"a": 0, "b": 1},
        bought=[2],
    )
    assert_accepts(m)


def test_reservation_capacity_rejects_a_2_node_run_on_1_node_bought():
    assert_rejects(
        micro(
            add_reservation_capacity, POOLED, pools=[pool()], picks=("a2",), bought=[1]
        )
    )


def test_reservation_capacity_accepts_a_2_node_run_on_2_nodes_bought():
    assert_accepts(
        micro(
            add_reservation_capacity, POOLED, pools=[pool()], picks=("a2",), bought=[2]
        )
    )


def test_reservation_capacity_accepts_no_node_bought_when_no_run_uses_the_reservation():
    assert_accepts(
        micro(
            add_reservation_capacity, POOLED, pools=[pool()], picks=("a3",), bought=[0]
        )
    )


def test_reservation_capacity_rejects_a_reserved_run_with_no_node_bought():
    assert_rejects(
        micro(
            add_reservation_capacity, POOLED, pools=[pool()], picks=("a1",), bought=[0]
        )
    )


# a 3 steps and b 1 or 3 steps on the reservation, whose term is only steps [0, 4)
SHORT_TERM = [
    run_candidate("a", pool=0, duration_steps=3),
    run_candidate("b", pool=0, duration_steps=1),
    run_candidate("b", pool=0, duration_steps=3),
]


def test_reservation_capacity_accepts_4_node_steps_on_1_node_for_a_4_step_term():
    m = micro(
        add_reservation_capacity,
        SHORT_TERM,
        pools=[pool(end=4)],
        picks=("a1", "b1"),
        starts={"a": 0, "b": 3},
        bought=[1],
    )
    assert_accepts(m)


def test_reservation_capacity_rejects_6_node_steps_on_1_node_for_a_4_step_term():
    # back to back, so the cumulative holds; b runs past the term (add_windows' business), and the
    # energy row Σ d·nodes ≤ term·bought (6 > 4) is what rejects it here
    m = micro(
        add_reservation_capacity,
        SHORT_TERM,
        pools=[pool(end=4)],
        picks=("a1", "b2"),
        starts={"a": 0, "b": 3},
        bought=[1],
    )
    assert_rejects(m)


# ---------------------------------------------------------------- add_energy_cuts
# Redundant cuts: each rejects only what the cumulatives and windows reject too, but the LP sees
# them. Starts are left free: a cut is about the picks (and nodes bought) alone.

# a and b must both lie in steps [0, 4), 8 GPUs each, 2 or 3 steps long
SQUEEZED = [
    run_candidate("a"),
    run_candidate("a", duration_steps=3),
    run_candidate("b"),
    run_candidate("b", duration_steps=3),
]
SQUEEZED_RUNS = [run_info("a", due=4), run_info("b", due=4)]
QUOTA_8 = BatchLimits(gpu_quotas={"aws": 8})


def test_energy_cut_accepts_32_gpu_steps_in_a_4_step_window_under_a_quota_of_8():
    assert_accepts(
        micro(
            add_energy_cuts, SQUEEZED, SQUEEZED_RUNS, limits=QUOTA_8, picks=("a1", "b1")
        )
    )


def test_energy_cut_rejects_48_gpu_steps_in_a_4_step_window_under_a_quota_of_8():
    assert_rejects(
        micro(
            add_energy_cuts, SQUEEZED, SQUEEZED_RUNS, limits=QUOTA_8, picks=("a2", "b2")
        )
    )


def test_energy_cut_rejects_40_of_32_gpu_steps_when_only_a_month_holds_both_runs():
    # a in [0, 3) for 3 steps and b in [1, 4) for 2 steps: no run's window holds the other, the month [0, 4) both
    rows = [run_candidate("a", duration_steps=3), run_candidate("b", duration_steps=2)]
    runs = [run_info("a", due=3), run_info("b", release=1, due=4)]
    months = BatchLimits(
        gpu_quotas={"aws": 8}, months=(("2027-01", 0, 4, {}), ("2027-02", 4, 8, {}))
    )
    assert_rejects(
        micro(add_energy_cuts, rows, runs, limits=months, picks=("a1", "b1"))
    )


def test_energy_cut_accepts_40_gpu_steps_when_no_window_holds_both_runs():
    # the same runs without months: no window holds two candidates, so no cut (the quota's cumulative rejects it)
    rows = [run_candidate("a", duration_steps=3), run_candidate("b", duration_steps=2)]
    runs = [run_info("a", due=3), run_info("b", release=1, due=4)]
    assert_accepts(
        micro(add_energy_cuts, rows, runs, limits=QUOTA_8, picks=("a1", "b1"))
    )


# a and b must both lie in steps [0, 4), each 3 steps on one node of a reservation for [0, 8)
POOL_SQUEEZED = [
    run_candidate("a", pool=0, duration_steps=3),
    run_candidate("b", pool=0, duration_steps=3),
]


def test_energy_cut_accepts_6_node_steps_in_a_4_step_window_on_2_nodes_bought():
    assert_accepts(
        micro(
            add_energy_cuts,
            POOL_SQUEEZED,
            SQUEEZED_RUNS,
            [pool()],
            picks=("a1", "b1"),
            bought=[2],
        )
    )


def test_energy_cut_rejects_6_node_steps_in_a_4_step_window_on_1_node_bought():
    # the term's own energy row (6 <= 8 x 1) lets it through; the window [0, 4) does not
    assert_rejects(
        micro(
            add_energy_cuts,
            POOL_SQUEEZED,
            SQUEEZED_RUNS,
            [pool()],
            picks=("a1", "b1"),
            bought=[1],
        )
    )


# ---------------------------------------------------------------- add_budgets

SPEND = [
    run_candidate("a", cost_usd=0.60),
    run_candidate("a", cost_usd=0.61),
    run_candidate("b", cost_usd=0.50),
    run_candidate("b", pool=0, cost_usd=0.0),
]


def test_budget_accepts_110_cents_of_a_110_cent_budget():
    assert_accepts(
        micro(
            add_budgets,
            SPEND,
            pools=[pool()],
            limits=BatchLimits(budget_usd=1.10),
            picks=("a1", "b1"),
            bought=[0],
        )
    )


def test_budget_rejects_111_cents_of_a_110_cent_budget():
    assert_rejects(
        micro(
            add_budgets,
            SPEND,
            pools=[pool()],
            limits=BatchLimits(budget_usd=1.10),
            picks=("a2", "b1"),
            bought=[0],
        )
    )


def test_budget_accepts_a_reserved_node_paid_for_its_whole_term_within_budget():
    # 1 node x 8 h x $1 = $8.00, plus a's 60 cents; b runs on the reservation for nothing
    assert_accepts(
        micro(
            add_budgets,
            SPEND,
            pools=[pool()],
            limits=BatchLimits(budget_usd=8.60),
            picks=("a1", "b2"),
            bought=[1],
        )
    )


def test_budget_rejects_a_reserved_node_paid_for_its_whole_term_one_cent_over_budget():
    assert_rejects(
        micro(
            add_budgets,
            SPEND,
            pools=[pool()],
            limits=BatchLimits(budget_usd=8.59),
            picks=("a1", "b2"),
            bought=[1],
        )
    )


# a and b 60 cents each, 2 steps; January is steps [0, 4), February [4, 8); $1 a month
MONTHLY = [run_candidate("a", cost_usd=0.60), run_candidate("b", cost_usd=0.60)]
TWO_MONTHS = (("2027-01", 0, 4, {}), ("2027-02", 4, 8, {}))
A_DOLLAR_A_MONTH = BatchLimits(monthly_budget_usd=1.0, months=TWO_MONTHS)


def test_budget_monthly_accepts_one_60_cent_run_starting_in_each_month():
    # a starts in January and ends in February: it counts in January only
    assert_accepts(
        micro(
            add_budgets,
            MONTHLY,
            limits=A_DOLLAR_A_MONTH,
            picks=("a1", "b1"),
            starts={"a": 3, "b": 4},
        )
    )


def test_budget_monthly_rejects_two_60_cent_runs_starting_in_one_month():
    assert_rejects(
        micro(
            add_budgets,
            MONTHLY,
            limits=A_DOLLAR_A_MONTH,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 3},
        )
    )


def test_budget_monthly_accepts_a_run_left_out_beside_a_month_it_would_overfill():
    runs = [
        run_info("a"),
        run_info("b", required=False),
    ]  # b left out, its start in January: it costs nothing
    m = micro(
        add_budgets,
        MONTHLY,
        runs,
        limits=A_DOLLAR_A_MONTH,
        picks=("a1",),
        starts={"a": 0, "b": 0},
        scheduled={"b": False},
    )
    assert_accepts(m)


# only January listed, $2 for it: both runs fit the money, so only where they start matters
ONLY_JANUARY = BatchLimits(monthly_budget_usd=2.0, months=TWO_MONTHS[:1])


def test_budget_monthly_accepts_runs_starting_inside_the_months_listed():
    assert_accepts(
        micro(
            add_budgets,
            MONTHLY,
            limits=ONLY_JANUARY,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 3},
        )
    )


def test_budget_monthly_rejects_a_run_starting_outside_every_month_listed():
    # a side rule of the month flags (exactly one per scheduled run): the months must cover every start
    assert_rejects(
        micro(
            add_budgets,
            MONTHLY,
            limits=ONLY_JANUARY,
            picks=("a1", "b1"),
            starts={"a": 0, "b": 4},
        )
    )


# a run of 20 or 30 cents; one node of a reservation at $0.20 an hour, 4 of its hours in each month (80 cents)
RESERVED_MONTHS = (("2027-01", 0, 4, {0: 4.0}), ("2027-02", 4, 8, {0: 4.0}))
WITH_RESERVATION = BatchLimits(monthly_budget_usd=1.0, months=RESERVED_MONTHS)
CHEAP = [run_candidate("a", cost_usd=0.20), run_candidate("a", cost_usd=0.30)]


def test_budget_monthly_accepts_80_cents_of_reservation_and_a_20_cent_run_in_a_1_dollar_month():
    m = micro(
        add_budgets,
        CHEAP,
        pools=[pool(price_per_node_h=0.2)],
        limits=WITH_RESERVATION,
        picks=("a1",),
        starts={"a": 0},
        bought=[1],
    )
    assert_accepts(m)


def test_budget_monthly_rejects_80_cents_of_reservation_and_a_30_cent_run_in_a_1_dollar_month():
    m = micro(
        add_budgets,
        CHEAP,
        pools=[pool(price_per_node_h=0.2)],
        limits=WITH_RESERVATION,
        picks=("a2",),
        starts={"a": 0},
        bought=[1],
    )
    assert_rejects(m)
