"""Layer 7, reports: what the commands print and write.

render  one DataFrame as a table, CSV, JSON or Markdown
solve   the solve report and its JSON contract, explanations, simulations
batch   the batch report and its JSON contract
gantt   the Gantt chart of a batch schedule
"""
