"""Layer 7, reports: what the commands print and write; they format figures the pipelines computed.

render    one DataFrame as a table, CSV, JSON or Markdown
status    the one status line of both commands
solve     the solve report and its JSON contract (explanations from `solve/explain.py`)
batch     the batch report (its JSON contract is `batch/contract.py`'s)
estimate  the estimate table (memory by part, layout, W per GPU model and count)
gantt     the Gantt chart of a batch schedule
serving   an endpoint's plan: nodes and replicas per period, latency, cost
simulate  `planner simulate`: jobs, endpoints, traces and schedules replayed, beside the plan
calibrate `planner calibrate`: the runs against their plan, and the fit as the YAML a scenario names
"""
