"""Package data of the planner (installed as planner._scenarios.catalogs): not code."""
