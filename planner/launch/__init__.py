"""Layer 8b, launch: from plan to launch and back. A plan's jobs written for the tools that launch them
(`planner export`), and the runs that happened read back to refit the planner's assumptions (`planner calibrate`).

jobs       a plan's jobs, endpoint pools and quotas in the terms every launcher takes
render     what every launcher's files share: YAML under comments, accelerators, PLANNER_* variables, labels
skypilot   a job as a SkyPilot task, an endpoint pool as a SkyPilot service
dstack     a job as a dstack task, an endpoint pool as a dstack service
kueue      each provider's flavours and quotas as Kueue queues, a job as a suspended Job
export     the files of a plan or schedule, and a quarter's launch.sh
calibrate  the runs against the plan they followed, and the refit
"""
