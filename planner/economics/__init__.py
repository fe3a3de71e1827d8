"""Layer 3b, economics: what a candidate is expected to cost (pure functions on numbers).

costmodel  expected wall time, preemption rework, rounding waste, P(deadline) (docs/cost-model.md)
screen     its closed forms vectorised over many keys (screening bounds)
inputs     the adapter from a workload to its inputs
simulate   Monte-Carlo replay of the same contract, to check it
fallback   spot with an on-demand fallback (cost model §10)
estimate_error  the throughput estimate's own error in P(deadline) (cost model §12)
trace_replay  a spot job replayed on measured availability traces
spot_evidence  spot candidates held to those replays before they are offered (cost model §11)
obtainability  how many spot nodes of an offer family the probes held at once
endpoint_sim  an endpoint's plan replayed: Poisson arrivals, preemptions, replacements
schedule_sim  a quarter's schedule replayed: does it hold when runs take as long as they happen to?
"""
