"""Layer 1, the schema: what a user may write, as pydantic models (no pandas, no solver).

units     quantities with units in the files (`4M`, `80GiB`, `36h`, `$2.10`)
scenario  catalogs' rows (Gpu, Offer, Provider, ModelArch) and the scenario file (Workload, Scenario)
quarter   the quarter file of `planner batch` (Run, Reservation, Quarter)
json_schema  both files' JSON Schema, for editors (`planner schema`)
plan      names of the plan's JSON contract shared by the layers (the cost breakdown's parts)
"""
