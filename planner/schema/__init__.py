"""Layer 1, the schema: what a user may write, as pydantic models (no pandas, no solver).

units     quantities with units in the files (`4M`, `80GiB`, `36h`, `$2.10`)
fields    the field types the models share (quantities with units and bounds, names, enumerations, Strict)
catalog   catalogs' rows (Gpu, Offer, Provider, ModelArch, ModelSpec)
endpoint  a serving endpoint's request mix, traffic, SLO and measured capacity
workload  a workload (Workload: work, GPUs, checkpointing, data, placement, risk)
scenario  the scenario file's root (Scenario, Defaults, Constraints, Override)
quarter   the quarter file of `planner batch` (Run, Reservation, Quarter)
json_schema  both files' JSON Schema, for editors (`planner schema`)
plan      names of the plan's JSON contract shared by the layers (the cost breakdown's parts)
"""
