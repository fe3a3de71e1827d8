"""GPU rental planner: cheapest cloud GPU plans for AI workloads."""
