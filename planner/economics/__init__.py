"""Layer 3b, economics: what a candidate is expected to cost (pure functions on numbers).

costmodel  expected wall time, preemption rework, rounding waste, P(deadline) (docs/cost-model.md)
screen     its closed forms vectorised over many keys (screening bounds)
inputs     the adapter from a workload to its inputs
simulate   Monte-Carlo replay of the same contract, to check it
"""
