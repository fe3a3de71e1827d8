"""Layer 7, reports: what the commands print and write.

render    one DataFrame as a table, CSV, JSON or Markdown
status    the one status line and solve_report block of both commands
solve     the solve report and its JSON contract, explanations, simulations
batch     the batch report and its JSON contract
estimate  the estimate table (memory by part, layout, W per GPU model and count)
gantt     the Gantt chart of a batch schedule
serving   an endpoint's plan: nodes and replicas per period, latency, cost
traces    `planner simulate --traces`: plans replayed on measured spot availability
"""
