"""Names of the plan's JSON contract shared by the layers that write, price and check it (docs/cost-model.md)."""
from __future__ import annotations

PRICED_KEYS = ("compute", "checkpointing", "startup", "preemption_rework", "rounding_waste")
"""The parts of a job's expected cost priced per node-hour (the cost model's)."""
BREAKDOWN_KEYS = PRICED_KEYS + ("storage", "egress")
"""Every part of a job's expected cost, in the order `breakdown_usd` lists them."""
