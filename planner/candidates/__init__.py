"""Layer 4, candidates: every (workload, offer, market, node count) worth a decision variable.

limits    the scenario's shared limits (quotas, node caps, budget) and the cents they are counted in
cache     what generation keeps between workloads and calls, owned by the caller
generate  expand offers into rows, attach physics per hardware shape, screen with cost bounds,
          price the survivors exactly, prune what cannot be optimal
endpoints  serving options: every (offer, TP degree, market) that can hold replicas, and its capacity
endpoint_load  what a planned pool's replicas see at the load routed to them (load share, latencies)
"""
