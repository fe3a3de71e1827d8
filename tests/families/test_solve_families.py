"""Each constraint family of the `planner solve` CP-SAT model on its own, in accept/reject pairs.

A micro-model is a 2-4 row candidate table, its pick variables, one family, and the picks
fixed to the case at hand (`choose`): the family must accept one assignment (CP-SAT finds it
feasible) and reject its neighbour (CP-SAT proves it infeasible).
"""

from __future__ import annotations

import pytest

from families.factories import (
    assert_accepts,
    assert_every_family_tested,
    assert_rejects,
    candidate,
    candidates,
    choose,
    endpoint,
    option,
    plan_model,
    serving_model,
    set_nodes,
)
from planner.candidates.limits import Limits
from planner.solve.model import (
    CONSTRAINT_FAMILIES,
    add_budget,
    add_gpu_quotas,
    add_node_limits,
    add_one_candidate_per_workload,
    add_same_provider_groups,
    add_same_region_groups,
    build_model,
)
from planner.solve.serving import (
    add_endpoint_capacity,
    add_endpoint_pools,
    add_endpoint_routing,
    add_endpoint_schedule,
    add_endpoint_spread,
    add_spot_pool,
)

FAMILY_TESTS = {
    add_one_candidate_per_workload: "test_one_candidate_per_workload_",
    add_gpu_quotas: "test_gpu_quota_",
    add_node_limits: "test_node_limit_",
    add_budget: "test_budget_",
    add_same_region_groups: "test_same_region_",
    add_same_provider_groups: "test_same_provider_",
    add_endpoint_routing: "test_endpoint_routing_",
    add_endpoint_capacity: "test_endpoint_capacity_",
    add_spot_pool: "test_spot_pool_",
    add_endpoint_schedule: "test_endpoint_schedule_",
    add_endpoint_pools: "test_endpoint_pools_",
    add_endpoint_spread: "test_endpoint_spread_",
}
"""Every family and the prefix of its tests; `test_every_family_has_accept_and_reject_tests` holds them to it."""


def micro(
    family, rows, limits: Limits = Limits(), picks: tuple[str, ...] | None = None
):
    """The pick variables over `rows`, `family` alone, and the picks fixed when `picks` is given."""
    m = plan_model(*rows)
    family(m, limits)
    if picks is not None:
        choose(m, *picks)
    return m


def test_every_family_has_accept_and_reject_tests():
    assert_every_family_tested(CONSTRAINT_FAMILIES, FAMILY_TESTS, globals())


def test_micro_model_variables_are_the_builders():
    """The factory's picks and table columns are what `build_model` makes (so each family sees the real thing)."""
    rows = [
        candidate("a"),
        candidate("a", provider="gcp"),
        candidate("b", region="us-west-2"),
    ]
    m, real = plan_model(*rows), build_model(candidates(*rows), Limits())
    assert [v.name for v in m.pick] == [v.name for v in real.pick]
    assert [list(m.model.proto.variables[v.index].domain) for v in m.pick] == [
        list(real.model.proto.variables[v.index].domain) for v in real.pick
    ]
    assert m.candidates.equals(real.candidates)


# ---------------------------------------------------------------- add_one_candidate_per_workload

ONE_EACH = [
    candidate("a", cost_usd=10),
    candidate("a", provider="gcp", cost_usd=12),
    candidate("b"),
]


def test_one_candidate_per_workload_accepts_one_pick_for_each_workload():
    assert_accepts(micro(add_one_candidate_per_workload, ONE_EACH, picks=("a2", "b1")))


def test_one_candidate_per_workload_rejects_a_workload_run_twice():
    assert_rejects(
        micro(add_one_candidate_per_workload, ONE_EACH, picks=("a1", "a2", "b1"))
    )


def test_one_candidate_per_workload_rejects_a_workload_left_out():
    assert_rejects(micro(add_one_candidate_per_workload, ONE_EACH, picks=("a1",)))


# ---------------------------------------------------------------- add_gpu_quotas

# three 8-GPU workloads on AWS, one on GCP (the AWS rows together exceed 16, so the quota row is kept)
QUOTA = [candidate("a"), candidate("b"), candidate("c"), candidate("c", provider="gcp")]


def test_gpu_quota_accepts_16_of_16_gpus():
    assert_accepts(
        micro(
            add_gpu_quotas,
            QUOTA,
            Limits(gpu_quotas={"aws": 16}),
            picks=("a1", "b1", "c2"),
        )
    )


def test_gpu_quota_rejects_24_of_16_gpus():
    assert_rejects(
        micro(
            add_gpu_quotas,
            QUOTA,
            Limits(gpu_quotas={"aws": 16}),
            picks=("a1", "b1", "c1"),
        )
    )


def test_gpu_quota_accepts_gpus_of_another_provider_beside_a_full_quota():
    # 8 of 8 on AWS, GCP's 8 do not count
    assert_accepts(
        micro(add_gpu_quotas, QUOTA, Limits(gpu_quotas={"aws": 8}), picks=("a1", "c2"))
    )


def test_gpu_quota_rejects_16_of_8_gpus_on_the_same_provider():
    assert_rejects(
        micro(add_gpu_quotas, QUOTA, Limits(gpu_quotas={"aws": 8}), picks=("a1", "b1"))
    )


# one H100 node and one A100 node on AWS for each of a and b
GPU_KINDS = [
    candidate("a"),
    candidate("a", gpu="A100-80GB", gpu_family="A100"),
    candidate("b"),
    candidate("b", gpu="A100-80GB", gpu_family="A100"),
]


# a family, any case, or a GPU name
@pytest.mark.parametrize("key", ["aws/H100", "aws/h100", "aws/H100-SXM"])
def test_gpu_quota_by_gpu_accepts_8_h100s_beside_8_a100s(key):
    assert_accepts(
        micro(
            add_gpu_quotas, GPU_KINDS, Limits(gpu_quotas={key: 8}), picks=("a1", "b2")
        )
    )


@pytest.mark.parametrize("key", ["aws/H100", "aws/h100", "aws/H100-SXM"])
def test_gpu_quota_by_gpu_rejects_16_of_8_h100s(key):
    assert_rejects(
        micro(
            add_gpu_quotas, GPU_KINDS, Limits(gpu_quotas={key: 8}), picks=("a1", "b1")
        )
    )


def test_gpu_quota_by_gpu_and_by_provider_together_rejects_what_only_the_provider_quota_forbids():
    # 8 H100s (within aws/H100: 8) + 8 A100s = 16 GPUs on AWS, over aws: 8
    limits = Limits(gpu_quotas={"aws/H100": 8, "aws": 8})
    assert_rejects(micro(add_gpu_quotas, GPU_KINDS, limits, picks=("a1", "b2")))


# ---------------------------------------------------------------- add_node_limits

P5 = "aws/us-east-1/p5.48xlarge"
# a on 1 or 2 p5 nodes, b on 1 p5 node or on another offer
NODES = [
    candidate("a", nodes=1, gpus=8),
    candidate("a", nodes=2, gpus=16),
    candidate("b", nodes=1),
    candidate("b", nodes=1, offer_key="aws/us-east-1/p4d.24xlarge"),
]


def test_node_limit_accepts_2_of_2_nodes_of_one_offer():
    assert_accepts(
        micro(add_node_limits, NODES, Limits(node_limits={P5: 2}), picks=("a1", "b1"))
    )


def test_node_limit_rejects_3_of_2_nodes_of_one_offer():
    assert_rejects(
        micro(add_node_limits, NODES, Limits(node_limits={P5: 2}), picks=("a2", "b1"))
    )


def test_node_limit_accepts_nodes_of_another_offer_beside_a_full_limit():
    assert_accepts(
        micro(add_node_limits, NODES, Limits(node_limits={P5: 2}), picks=("a2", "b2"))
    )


def test_node_limit_from_the_catalog_accepts_2_of_max_nodes_2():
    rows = [dict(r, max_nodes=2.0) for r in NODES]
    assert_accepts(micro(add_node_limits, rows, picks=("a1", "b1")))


def test_node_limit_from_the_catalog_rejects_3_of_max_nodes_2():
    rows = [dict(r, max_nodes=2.0) for r in NODES]
    assert_rejects(micro(add_node_limits, rows, picks=("a2", "b1")))


# the cap is 2 either way
SMALLER_OF_TWO = pytest.mark.parametrize("catalog, scenario", [(2.0, 5), (5.0, 2)])


@SMALLER_OF_TWO
def test_node_limit_takes_the_smaller_of_catalog_and_scenario_and_accepts_2_nodes(
    catalog, scenario
):
    rows = [dict(r, max_nodes=catalog) for r in NODES]
    assert_accepts(
        micro(
            add_node_limits,
            rows,
            Limits(node_limits={P5: scenario}),
            picks=("a1", "b1"),
        )
    )


@SMALLER_OF_TWO
def test_node_limit_takes_the_smaller_of_catalog_and_scenario_and_rejects_3_nodes(
    catalog, scenario
):
    rows = [dict(r, max_nodes=catalog) for r in NODES]
    assert_rejects(
        micro(
            add_node_limits,
            rows,
            Limits(node_limits={P5: scenario}),
            picks=("a2", "b1"),
        )
    )


# a and b each on one p5 node, on demand or on spot
MARKETS = [
    candidate("a"),
    candidate("a", market="spot"),
    candidate("b"),
    candidate("b", market="spot"),
]


def test_node_limit_per_market_accepts_1_on_demand_and_1_spot_node_under_a_limit_of_1():
    limits = Limits(node_limits={P5: 1}, node_limits_per_market=True)
    assert_accepts(micro(add_node_limits, MARKETS, limits, picks=("a1", "b2")))


def test_node_limit_per_market_rejects_2_spot_nodes_under_a_limit_of_1():
    limits = Limits(node_limits={P5: 1}, node_limits_per_market=True)
    assert_rejects(micro(add_node_limits, MARKETS, limits, picks=("a2", "b2")))


def test_node_limit_across_markets_rejects_1_on_demand_and_1_spot_node_under_a_limit_of_1():
    assert_rejects(
        micro(add_node_limits, MARKETS, Limits(node_limits={P5: 1}), picks=("a1", "b2"))
    )


def test_node_limit_row_is_left_out_when_one_candidate_per_workload_cannot_exceed_it():
    """Not a rule of its own: `node_limit_rows` leaves a row out when the largest candidate of each
    workload fits together, so the family alone lets two candidates of ONE workload (2 + 2 nodes)
    past a limit of 3; `add_one_candidate_per_workload` is what rules that assignment out."""
    rows = [candidate("a", nodes=2), candidate("a", nodes=2, market="spot")]
    alone = micro(
        add_node_limits, rows, Limits(node_limits={P5: 3}), picks=("a1", "a2")
    )
    assert_accepts(alone)
    add_one_candidate_per_workload(alone, Limits())
    assert_rejects(alone)


# ---------------------------------------------------------------- add_budget

BUDGET = [
    candidate("a", cost_usd=0.60),
    candidate("a", cost_usd=0.61),
    candidate("b", cost_usd=0.50),
]


def test_budget_accepts_110_cents_of_a_110_cent_budget():
    assert_accepts(
        micro(add_budget, BUDGET, Limits(budget_usd=1.10), picks=("a1", "b1"))
    )


def test_budget_rejects_111_cents_of_a_110_cent_budget():
    assert_rejects(
        micro(add_budget, BUDGET, Limits(budget_usd=1.10), picks=("a2", "b1"))
    )


def test_budget_accepts_29_cents_of_a_29_cent_budget_not_truncated_to_28():
    # 0.29 / 0.01 is 28.999...: the budget must still be 29 cents
    rows = [candidate("a", cost_usd=0.29), candidate("a", cost_usd=0.30)]
    assert_accepts(micro(add_budget, rows, Limits(budget_usd=0.29), picks=("a1",)))


def test_budget_rejects_30_cents_of_a_29_cent_budget():
    rows = [candidate("a", cost_usd=0.29), candidate("a", cost_usd=0.30)]
    assert_rejects(micro(add_budget, rows, Limits(budget_usd=0.29), picks=("a2",)))


def test_budget_accepts_any_cost_without_a_budget():
    m = micro(add_budget, BUDGET, Limits(), picks=("a1", "a2", "b1"))
    assert len(m.model.proto.constraints) == len(m.pick)  # only the fixing constraints
    assert_accepts(m)


# ---------------------------------------------------------------- add_same_region_groups

# a in us-east-1; b in us-east-1, us-west-2 or GCP's us-east-1; c anywhere
REGIONS = [
    candidate("a"),
    candidate("b"),
    candidate("b", region="us-west-2"),
    candidate("b", provider="gcp"),
    candidate("c", region="us-west-2"),
]
TOGETHER = Limits(same_region=(("a", "b"),))


def test_same_region_accepts_both_members_in_aws_us_east_1():
    assert_accepts(
        micro(add_same_region_groups, REGIONS, TOGETHER, picks=("a1", "b1", "c1"))
    )


def test_same_region_rejects_members_in_us_east_1_and_us_west_2():
    assert_rejects(
        micro(add_same_region_groups, REGIONS, TOGETHER, picks=("a1", "b2", "c1"))
    )


def test_same_region_rejects_the_same_region_name_at_another_provider():
    # aws/us-east-1 and gcp/us-east-1 are two regions
    assert_rejects(
        micro(add_same_region_groups, REGIONS, TOGETHER, picks=("a1", "b3", "c1"))
    )


def test_same_region_accepts_a_workload_outside_the_group_in_another_region():
    # b and c together in aws/us-west-2, a (not grouped) in aws/us-east-1
    limits = Limits(same_region=(("b", "c"),))
    assert_accepts(
        micro(add_same_region_groups, REGIONS, limits, picks=("a1", "b2", "c1"))
    )


# ---------------------------------------------------------------- add_same_provider_groups

PROVIDERS = [
    candidate("a"),
    candidate("b", region="us-west-2"),
    candidate("b", provider="gcp"),
    candidate("c", provider="gcp"),
]
SAME_PROVIDER = Limits(same_provider=(("a", "b"),))


def test_same_provider_accepts_members_in_two_regions_of_aws():
    assert_accepts(
        micro(
            add_same_provider_groups, PROVIDERS, SAME_PROVIDER, picks=("a1", "b1", "c1")
        )
    )


def test_same_provider_rejects_members_on_aws_and_gcp():
    assert_rejects(
        micro(
            add_same_provider_groups, PROVIDERS, SAME_PROVIDER, picks=("a1", "b2", "c1")
        )
    )


def test_same_provider_accepts_two_groups_on_two_providers():
    limits = Limits(same_provider=(("a",), ("b", "c")))
    assert_accepts(
        micro(add_same_provider_groups, PROVIDERS, limits, picks=("a1", "b2", "c1"))
    )


def test_same_provider_rejects_b_with_a_on_aws_when_b_also_goes_with_c_on_gcp():
    # b ties a (AWS only) to c (GCP only)
    limits = Limits(same_provider=(("a", "b"), ("b", "c")))
    assert_rejects(
        micro(add_same_provider_groups, PROVIDERS, limits, picks=("a1", "b1", "c1"))
    )


# ---------------------------------------------------------------- endpoints


def test_endpoint_routing_accepts_every_slice_sent_somewhere():
    m = serving_model(
        [option(oid="a"), option(oid="b", offer_key="aws/us-west-2/g6.xlarge")],
        [endpoint(slices=4)],
    )
    add_endpoint_routing(m, Limits())
    set_nodes(m, "a", 1, slices={0: (3,)})
    set_nodes(m, "b", 1, slices={0: (1,)})
    assert_accepts(m)


def test_endpoint_routing_rejects_a_slice_left_unserved():
    m = serving_model(
        [option(oid="a"), option(oid="b", offer_key="aws/us-west-2/g6.xlarge")],
        [endpoint(slices=4)],
    )
    add_endpoint_routing(m, Limits())
    set_nodes(m, "a", 1, slices={0: (2,)})
    set_nodes(m, "b", 1, slices={0: (1,)})
    assert_rejects(m)


def test_endpoint_capacity_accepts_3_requests_per_s_on_2_nodes_of_2():
    m = serving_model([option(oid="a")], [endpoint()])
    add_endpoint_capacity(m, Limits())
    add_spot_pool(m, Limits())  # kept = nodes on demand
    set_nodes(m, "a", 2, slices={0: (1,)})
    assert_accepts(m)


def test_endpoint_capacity_rejects_3_requests_per_s_on_1_node_of_2():
    m = serving_model([option(oid="a")], [endpoint()])
    add_endpoint_capacity(m, Limits())
    add_spot_pool(m, Limits())
    set_nodes(m, "a", 1, slices={0: (1,)})
    assert_rejects(m)


def test_endpoint_capacity_accepts_exactly_full_nodes():
    m = serving_model([option(oid="a", node_rps=(1.5,))], [endpoint()])
    add_endpoint_capacity(m, Limits())
    add_spot_pool(m, Limits())
    set_nodes(m, "a", 2, slices={0: (1,)})
    assert_accepts(m)


def test_spot_pool_accepts_the_nodes_the_binomial_quantile_keeps():
    m = serving_model(
        [option(oid="s", market="spot", kept=(0, 0, 1, 2, 3))], [endpoint()]
    )
    add_endpoint_capacity(m, Limits())
    add_spot_pool(m, Limits())
    set_nodes(m, "s", 3, slices={0: (1,)})  # 3 spot nodes count as 2: 4 requests/s >= 3
    assert_accepts(m)


def test_spot_pool_rejects_spot_nodes_counted_in_full():
    m = serving_model(
        [option(oid="s", market="spot", kept=(0, 0, 1, 1, 2))], [endpoint()]
    )
    add_endpoint_capacity(m, Limits())
    add_spot_pool(m, Limits())
    set_nodes(m, "s", 2, slices={0: (1,)})  # 2 spot nodes count as 1: 2 requests/s < 3
    assert_rejects(m)


def test_spot_pool_rejects_two_spot_pools_for_one_endpoint():
    m = serving_model(
        [
            option(oid="s1", market="spot"),
            option(oid="s2", market="spot", offer_key="aws/us-west-2/g6.xlarge"),
        ],
        [endpoint()],
    )
    add_spot_pool(m, Limits())
    set_nodes(m, "s1", 1)
    set_nodes(m, "s2", 1)
    assert_rejects(m)


def test_spot_pool_accepts_one_spot_pool_beside_on_demand():
    m = serving_model(
        [
            option(oid="s1", market="spot"),
            option(oid="od", offer_key="aws/us-west-2/g6.xlarge"),
        ],
        [endpoint()],
    )
    add_spot_pool(m, Limits())
    set_nodes(m, "s1", 1)
    set_nodes(m, "od", 2)
    assert_accepts(m)


def test_endpoint_schedule_rejects_different_nodes_per_period_without_autoscale():
    m = serving_model(
        [option(oid="a", session_h=(12.0, 12.0))],
        [endpoint(rates=((1.0,), (3.0,)), hours=(12, 12))],
    )
    add_endpoint_schedule(m, Limits())
    set_nodes(m, "a", 1, 2)
    assert_rejects(m)


def test_endpoint_schedule_accepts_the_same_nodes_all_day_without_autoscale():
    m = serving_model(
        [option(oid="a", session_h=(12.0, 12.0))],
        [endpoint(rates=((1.0,), (3.0,)), hours=(12, 12))],
    )
    add_endpoint_schedule(m, Limits())
    set_nodes(m, "a", 2, 2)
    assert_accepts(m)


def test_endpoint_schedule_accepts_more_nodes_by_day_with_autoscale():
    m = serving_model(
        [option(oid="a", session_h=(12.0, 12.0))],
        [endpoint(rates=((1.0,), (3.0,)), hours=(12, 12), autoscale=True)],
    )
    add_endpoint_schedule(m, Limits())
    set_nodes(m, "a", 1, 2)
    m.model.add(m.serving.base[0] == 1)
    assert_accepts(m)


def test_endpoint_schedule_rejects_a_base_above_a_period_with_autoscale():
    m = serving_model(
        [option(oid="a", session_h=(12.0, 12.0))],
        [endpoint(rates=((1.0,), (3.0,)), hours=(12, 12), autoscale=True)],
    )
    add_endpoint_schedule(m, Limits())
    set_nodes(m, "a", 1, 2)
    m.model.add(m.serving.base[0] == 2)
    assert_rejects(m)


def test_gpu_quota_with_an_endpoint_rejects_a_job_and_a_node_over_the_quota():
    m = serving_model(
        [option(oid="e", gpus_per_node=8)], [endpoint()], rows=(candidate("a", gpus=8),)
    )
    add_gpu_quotas(m, Limits(gpu_quotas={"aws": 8}))
    choose(m, "a1")
    set_nodes(m, "e", 1)
    assert_rejects(m)


def test_gpu_quota_with_an_endpoint_accepts_a_job_and_a_node_within_the_quota():
    m = serving_model(
        [option(oid="e", gpus_per_node=8)], [endpoint()], rows=(candidate("a", gpus=8),)
    )
    add_gpu_quotas(m, Limits(gpu_quotas={"aws": 16}))
    choose(m, "a1")
    set_nodes(m, "e", 1)
    assert_accepts(m)


def test_node_limit_with_an_endpoint_rejects_a_job_and_endpoint_nodes_over_the_limit():
    key = "aws/us-east-1/p5.48xlarge"
    m = serving_model(
        [option(oid="e", offer_key=key)], [endpoint()], rows=(candidate("a", nodes=1),)
    )
    add_node_limits(m, Limits(node_limits={key: 2}))
    choose(m, "a1")
    set_nodes(m, "e", 2)
    assert_rejects(m)


def test_node_limit_with_an_endpoint_accepts_a_job_and_endpoint_nodes_within_the_limit():
    key = "aws/us-east-1/p5.48xlarge"
    m = serving_model(
        [option(oid="e", offer_key=key)], [endpoint()], rows=(candidate("a", nodes=1),)
    )
    add_node_limits(m, Limits(node_limits={key: 2}))
    choose(m, "a1")
    set_nodes(m, "e", 1)
    assert_accepts(m)


def test_budget_with_an_endpoint_rejects_a_job_and_a_day_of_nodes_over_the_budget():
    m = serving_model(
        [option(oid="e")], [endpoint()], rows=(candidate("a", cost_usd=10.0),)
    )
    add_budget(m, Limits(budget_usd=57.99))
    choose(m, "a1")
    set_nodes(m, "e", 2)  # 2 nodes x 24 h x $1 = $48, plus the job's $10
    m.model.add(m.serving.base[0] == 2)
    assert_rejects(m)


def test_budget_with_an_endpoint_accepts_a_job_and_a_day_of_nodes_within_the_budget():
    m = serving_model(
        [option(oid="e")], [endpoint()], rows=(candidate("a", cost_usd=10.0),)
    )
    add_budget(m, Limits(budget_usd=58.0))
    choose(m, "a1")
    set_nodes(m, "e", 2)
    m.model.add(m.serving.base[0] == 2)
    assert_accepts(m)


SPREAD = [
    option(oid="a"),
    option(oid="b", offer_key="aws/us-west-2/g6.xlarge"),
    option(oid="c", offer_key="aws/eu-west-1/g6.xlarge"),
    option(oid="g", provider="gcp", offer_key="gcp/us-central1/g2-standard-4"),
]


def _spread(m) -> None:
    """The spread's limits over the pool flags that the nodes raise."""
    add_endpoint_pools(m, Limits())
    add_endpoint_spread(m, Limits())


def test_endpoint_pools_rejects_nodes_on_an_option_that_is_not_a_pool():
    m = serving_model(SPREAD, [endpoint()])
    add_endpoint_pools(m, Limits())
    set_nodes(m, "a", 1)
    m.model.add(m.serving.pools[0] == 0)
    assert_rejects(m)


def test_endpoint_pools_accepts_nodes_on_a_pool_and_none_elsewhere():
    m = serving_model(SPREAD, [endpoint()])
    add_endpoint_pools(m, Limits())
    set_nodes(m, "a", 1)
    set_nodes(m, "b", 0)
    m.model.add(m.serving.pools[0] == 1)
    m.model.add(m.serving.pools[1] == 0)
    assert_accepts(m)


def test_endpoint_pools_are_priced_where_the_endpoint_says():
    """`pool_usd_per_h` puts each pool's operating cost over the endpoint's duration among the cost terms."""
    m = serving_model(SPREAD, [endpoint(pool_usd_per_h=2.0)])
    priced = {var.index: cents for _, cents, var in m.serving.cost_terms}
    # $2/h x 24 h, in cents
    assert all(priced[m.serving.pools[row].index] == 4800 for row in range(4))
    plain = serving_model(SPREAD, [endpoint()])
    assert not any(
        var.index in {v.index for v in plain.serving.pools.values()}
        for _, _, var in plain.serving.cost_terms
    )


def test_endpoint_spread_accepts_two_pools_at_one_provider():
    m = serving_model(SPREAD, [endpoint()])
    _spread(m)
    set_nodes(m, "a", 1)
    set_nodes(m, "b", 2)
    assert_accepts(m)


def test_endpoint_spread_rejects_a_third_pool():
    m = serving_model(SPREAD, [endpoint()])
    _spread(m)
    for oid in "abc":
        set_nodes(m, oid, 1)
    assert_rejects(m)


def test_endpoint_spread_rejects_a_second_provider():
    m = serving_model(SPREAD, [endpoint()])
    _spread(m)
    set_nodes(m, "a", 1)
    set_nodes(m, "g", 1)
    assert_rejects(m)


def test_endpoint_spread_accepts_a_second_provider_and_third_pool_where_allowed():
    m = serving_model(SPREAD, [endpoint(max_pools=3, max_providers=2)])
    _spread(m)
    for oid in "abg":
        set_nodes(m, oid, 1)
    assert_accepts(m)


def test_endpoint_spread_rejects_a_pool_that_runs_only_at_night():
    """A pool counts over all periods: one used by night alone is still a pool."""
    options = [dict(o, session_h=[12.0, 12.0]) for o in SPREAD]
    m = serving_model(
        options,
        [endpoint(rates=((1.0,), (3.0,)), hours=(12, 12), autoscale=True, max_pools=2)],
    )
    _spread(m)
    set_nodes(m, "a", 1, 1)
    set_nodes(m, "b", 0, 1)
    set_nodes(m, "c", 1, 0)
    assert_rejects(m)
