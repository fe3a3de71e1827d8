"""Package data of the planner (installed as planner._scenarios): not code."""
