"""Layer 4, candidates: every (workload, offer, market, node count) worth a decision variable.

limits    the scenario's shared limits (quotas, node caps, budget), which quotas cover a row, and the cents
          costs are counted in
cache     what generation keeps between workloads and calls, owned by the caller
offers    the offers a call prices: overrides and what-if multipliers applied, prices as arrays, a price-free token
generate  the stages below in turn per workload, then the Pareto front; workloads alike but for their names once
tables    candidate records as a table, a workload's Pareto front, classes of workloads alike stacked by name
lazy      front rows left unpriced (`generate(lazy=True)`), stood in at their bounds for the plan's LP
expand    stage 1: offers x markets x node counts into rows, with storage and egress, no prices
shapes    stage 2: physics per hardware shape, a floor on W for all, the full estimate where a row needs it
screen    stage 3: closed-form cost bounds per timing key, and the rows they prove beaten before pricing
price     stage 4: the exact cost model per timing key and deadline, a priced row's candidate record
risk      the workload's risk preferences, applied to priced spot candidates
purchase  candidates on the scenario's purchase options (reserved, capacity_block, flex_start), repriced by their terms
reasons   why a workload has no candidate, in words
endpoints  serving options: every (offer, TP degree, market) that can hold replicas, and its capacity
pool_availability  how many of a pool's nodes count: spot nodes away, nodes kept at an availability, pool tables
estimate_tables  `planner estimate`'s two tables: workloads' physics and endpoints' replica capacity
endpoint_load  what a planned pool's replicas see at the load routed to them (load share, latencies)
"""
