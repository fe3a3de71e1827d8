"""Layer 8, `planner whatif`: sweeps of prices and preemption rates over solves or schedules.

sweep  the grid, neighbouring points' hints, bisected switch points, executors (local or Dask)
plot   the sweep's picture
"""
