"""Layer 1, the schema: what a user may write, as pydantic models (no pandas, no solver).

units     quantities with units in the files (`4M`, `80GiB`, `36h`, `$2.10`)
scenario  catalogs' rows (Gpu, Offer, Provider, ModelArch) and the scenario file (Workload, Scenario)
quarter   the quarter file of `planner batch` (Run, Reservation, Quarter)
json_schema  the files' and the plans' JSON Schema, for editors and tools (`planner schema`)
plan      the plan's JSON contract as records: written by solve and batch, read back by replay
"""
