"""From plan to launch and back: a plan's jobs written for the tools that launch them (`planner export`), and
the runs that happened read back to refit the planner's assumptions (`planner calibrate`)."""
