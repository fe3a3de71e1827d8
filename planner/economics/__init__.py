"""Layer 3b, economics: what a candidate is expected to cost (pure functions on numbers).

costmodel  expected wall time, preemption rework, rounding waste, P(deadline) (docs/cost-model.md)
simulate   Monte-Carlo replay of the same contract, to check it
"""
