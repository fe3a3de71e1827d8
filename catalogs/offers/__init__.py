"""Package data of the planner (installed as planner._catalogs.offers): not code."""
