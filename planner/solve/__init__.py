"""Layer 5, `planner solve`: one candidate per workload under the shared limits.

pipeline  candidates -> model -> solve -> checked plan (and the infeasibility explanation)
lazy      rows left unpriced until the LP's reduced costs say a cheaper plan could use them
model     the CP-SAT model, one function per constraint family
search    how the model is searched: `solve_model`, the jobs' stages (LP, HiGHS, CP-SAT, tie-break)
endpoint_search  the search of a model with endpoints: CP-SAT alone, split by alike endpoint or provider
cpsat_search  one CP-SAT search: time limit, workers, seed, hints, a stop at the LP bound
rows      the shared-limit rows both CP-SAT and the LP read
bound     the LP relaxation and HiGHS's branch and bound beside CP-SAT
outcome   what either model's search ends with (status, dollars, gap, effort)
checker   an independent check of a plan against every rule
assignment_checks  each job's assignment against its offer and the scenario (for `checker`)
purchase_checks  a job on a purchase option against the scenario's option (for `checker`)
serving   the endpoints' variables and constraint families, in either CP-SAT model
endpoint_report  each endpoint's plan: pools per period, latency at the peak, costs (the JSON contract's)
explain   why the winner beat its runner-ups, and what a cheap spot plan risks (`--explain`)
cpsat     CP-SAT run so that Ctrl-C keeps meaning "stop, status 130"
interruptible  native searches (HiGHS) run the same way
"""
