"""Layer 1, the schema: what a user may write, as pydantic models (no pandas, no solver).

units     quantities with units in the files (`4M`, `80GiB`, `36h`, `$2.10`)
fields    the field types the models share (quantities with units and bounds, names, enumerations, Strict)
catalog   catalogs' rows (Gpu, Offer, Provider, ModelArch, ModelSpec)
endpoint  a serving endpoint's request mix, traffic, SLO and measured capacity
workload  a workload (Workload: work, GPUs, checkpointing, data, placement, risk)
scenario  the scenario file's root (Scenario, Defaults, Constraints, Override)
purchase  a scenario's purchase options (Reserved, CapacityBlock, FlexStart)
quarter   the quarter file of `planner batch` (Run, Reservation, Quarter)
json_schema  the files' and the plans' JSON Schema, for editors and tools (`planner schema`)
plan      the plan's JSON contract as records: written by solve and batch, read back by replay
calibration  a fit of what runs measured (Calibration)
runs      a run record (RunRecord): what happened to one run of a planned job
"""
