"""Package data of the planner (installed as planner._catalogs): not code."""
