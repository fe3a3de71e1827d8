"""Layer 3b, economics: what a candidate is expected to cost (pure functions on numbers).

costmodel  the expected cost assembled (§4–§7), P(deadline) and its quantiles, the `auto` interval (docs/cost-model.md)
candidate  one candidate's inputs and result, spot events per node lost, capacity waits, billed hours
segment_plans  the job as segments (§4) and the moments of its busy and wall time
wall_time  the law of the wall time on a grid (§6): P(T <= D), quantiles, Chernoff's tail bound
rounding_waste  the expected billed hours beyond those used, session by session (§5)
grids      the damped FFT grids the laws are computed on, shared with the fallback
screen     its closed forms vectorised over many keys (screening bounds)
inputs     the adapter from a workload to its inputs
simulate   Monte-Carlo replay of the same contract, to check it
run_log    runs drawn event by event with their logs, and a run's useful hours from its log
fallback   spot with an on-demand fallback (cost model §10)
purchase   reservations, capacity blocks and flex-start: billing by the term and a later start (cost model §13)
estimate_error  the throughput estimate's own error in P(deadline) (cost model §12)
trace_replay  a spot job replayed on measured availability traces
spot_evidence  spot candidates held to those replays before they are offered (cost model §11)
obtainability  how many spot nodes of an offer family the probes held at once
endpoint_sim  an endpoint's plan replayed: Poisson arrivals, preemptions, replacements
schedule_sim  a quarter's schedule replayed: does it hold when runs take as long as they happen to?
"""
