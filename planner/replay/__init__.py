"""Layer 6b, replays: `planner simulate`, a plan or a schedule held against chance and measured availability.

pipeline   what `planner simulate` replays: the plan file read back, or the input planned now
jobs       each job of a plan Monte-Carlo'd beside the cost model's figures
traces     spot and spot_fallback jobs replayed on measured availability traces
endpoints  each endpoint replayed minute by minute for its duration
schedule   a quarter's schedule replayed: runs late, runs pushed, the quarter held
runs       `--runs-out`: each job run event by event (as a truth says, if given), written as run records
"""
