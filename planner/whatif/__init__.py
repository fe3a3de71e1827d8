"""Layer 8, `planner whatif`: sweeps of prices and preemption rates over solves or schedules.

spec       what a sweep is asked for: parameters, ranges, `--where` conditions, checked; the grid of points
points     one point: the task, what is kept of its plan, the functions that solve it (scenario or quarter file)
sweep      running it: neighbouring points in runs with their hints, then bisected switch points
executors  where points run: inline, local processes or a Dask cluster
result     what it reports: every point and switch, rows per point, placements between switches, the text
plot   the sweep's picture
"""
