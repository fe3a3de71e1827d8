"""Layer 6, `planner batch`: a quarter's runs scheduled over a calendar.

pipeline  run candidates with calendar durations, then the schedule
model     the CP-SAT schedule, one function per constraint family
greedy    a list scheduler: the first incumbent and the baseline
bound     the LP bound over the reservation pools: branching on nodes bought
time_indexed the time-indexed LP itself, with rows per step for pools and broken quotas
background the bound computed in a thread beside the search
search    the phased search (whole model, the reservation core, the rest)
tie_break the best schedule's runs started as soon as its cost allows
checker   an independent hour-by-hour check of a schedule
contract  the solved quarter as its JSON contract, and the schedule confidence measured on it
"""
