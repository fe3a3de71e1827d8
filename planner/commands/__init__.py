"""Layer 9b, the commands `planner.cli` registers: each parses its options, calls a pipeline, formats its
result and writes it; no planning logic lives here.

options   what every command shares: option types, exit statuses, atomic outputs, progress bars
plan      `solve`, `batch` and `simulate`
whatif    `whatif`: the plan swept over price and preemption multipliers
inspect   `validate`, `estimate`, `gpus`, `examples` and `schema`
catalog   `catalog list|show|spot|import|refresh`
launch    `export` and `calibrate`: a plan for the launchers, and the runs that happened read back
"""
