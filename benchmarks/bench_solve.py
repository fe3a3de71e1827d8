"""Benchmark `planner solve` on generated scenarios of 10 to 30,000 workloads.

    python benchmarks/bench_solve.py --varied 100 1000 10000 30000   # varied workloads, as a user runs them
    python benchmarks/bench_solve.py --varied 100 --every-row        # and the same with every row priced
    python benchmarks/bench_solve.py --varied 100 1000 --table       # and by the table report (no runner-ups)
    python benchmarks/bench_solve.py --lp-bound 1000                 # time to proof, LP bound on and off
    python benchmarks/bench_solve.py --shipped                       # each shipped scenario, after the imports

`--varied` draws every field of every workload on its own (kind, model, method, GPU range, deadline, work,
sequence length, batch, estimate error, tolerance, provider/GPU/market rules, data location; no repeated
classes) under binding per-provider quotas, runs `planner solve` in a fresh process and prints its wall and CPU
time, the candidates' share (building and pricing them, earlier rounds of lazy pricing included), the solver's,
rows priced exactly and left unpriced, and peak memory. `--every-row` adds the same scenario with every row
priced (`make_plan(lazy=False)`, in this process): the reference plan and what lazy pricing saves.

`--shipped` plans each shipped `planner solve` scenario in a fresh process that has first imported every
module of the package (and OR-Tools, pandas): the CPU time of the first plan (data files read, caches cold),
then of the same plan again in that process (caches warm).

`--lp-bound` (`--variants`: CP-SAT alone under other parameters too; `--cached`: the candidates of the
last run of that size, kept in the temporary folder) builds the varied candidates once and solves them
twice, with and without the LP bound, printing gap and time to proof.

Without a flag, on templated workloads against every shipped catalog, with and without binding quotas, it
prints: candidates
before/after pruning, load, candidate-generation and model-build time, solve time, status, gap,
the whole `planner solve` command's wall time (`end_to_end_s`, a subprocess writing the JSON
report), and, as the floor any implementation is held to, CP-SAT alone on the same model
(no LP or branch and bound beside it, `--time-limit` 60 s): its time, status and gap, and the
ratio of the command's time to it. Two cost baselines are measured in the same run: (a) each
workload's cheapest on-demand candidate (quotas ignored), (b) a greedy that takes workloads
largest-first and picks the cheapest candidate that still fits the quotas.

    python benchmarks/bench_solve.py            # 10, 50, 200, 1,000, 3,000, 10,000 workloads
    python benchmarks/bench_solve.py 10 50      # some sizes
"""

from __future__ import annotations

import json
import math
import pickle
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.candidates.generate import generate  # noqa: E402
from planner.candidates.limits import limits_of  # noqa: E402
from planner.load.catalog import shipped_catalog_names  # noqa: E402
from planner.load.scenario import load_scenario  # noqa: E402
from planner.solve.model import build_model  # noqa: E402
from planner.solve.search import solve_model  # noqa: E402

TEMPLATES = [
    # (kind, yaml body) — realistic jobs of a platform team
    (
        "lora",
        "kind: fine_tuning\n    model: llama-3.1-8b\n    method: lora\n    activation_checkpointing: full\n"
        "    work: {{tokens: {tokens}M}}\n    gpus: {{min: 1, max: 8}}\n    time_budget: {budget}h\n",
    ),
    (
        "qlora",
        "kind: fine_tuning\n    model: mistral-7b\n    method: qlora\n    work: {{tokens: {tokens}M}}\n"
        "    gpus: {{min: 1, max: 4}}\n    time_budget: {budget}h\n",
    ),
    (
        "full8b",
        "kind: fine_tuning\n    model: llama-3-8b\n    sharding: zero3\n    activation_checkpointing: full\n"
        "    work: {{tokens: {tokens}M}}\n    gpus: {{min: 4, max: 32}}\n    time_budget: {budget}h\n",
    ),
    (
        "gen",
        "kind: batch_inference\n    model: llama-3.1-8b\n    generation: {{sequences: {tokens}k, batch: 64}}\n"
        "    gpus: {{min: 1, max: 16}}\n    time_budget: {budget}h\n    interruption_tolerance: stateless\n",
    ),
    (
        "stated",
        "kind: training\n    memory: {{model_states: {states}GiB, activations: 12GiB}}\n"
        "    work: {{gpu_hours: {gpu_hours}, reference_gpu: A100-80GB}}\n    gpus: {{min: 2, max: 16}}\n"
        "    time_budget: {budget}h\n    interruption_tolerance: {tolerance}\n",
    ),
]


def scenario_yaml(size: int, quotas: bool, seed: int = 7) -> str:
    rng = random.Random(seed * 1000 + size)
    lines = [
        f"name: bench-{size}{'-quotas' if quotas else ''}",
        f"catalogs: [{', '.join(shipped_catalog_names())}]",
        "workloads:",
    ]
    for i in range(size):
        kind, body = rng.choice(TEMPLATES)
        text = body.format(
            tokens=rng.choice([50, 100, 200, 400]),
            budget=rng.choice([24, 48, 96, 168]),
            states=rng.choice([32, 64, 128]),
            gpu_hours=rng.choice([20, 80, 200]),
            tolerance=rng.choice(["checkpointed", "none"]),
        )
        lines.append(f"  - name: {kind}-{i:04d}\n    {text.rstrip()}")
    if quotas:
        scale = max(8, size // 2)
        lines.append("constraints:\n  gpu_quotas:")
        for provider, share in (
            ("aws", 4),
            ("azure", 2),
            ("gcp", 2),
            ("lambda", 2),
            ("runpod", 1),
            ("nebius", 1),
        ):
            lines.append(f"    {provider}: {scale * share}")
    return "\n".join(lines) + "\n"


# (name, parameters in billions) of shipped models a platform team fine-tunes and serves
VARIED_MODELS = [
    ("llama-3.2-1b", 1.2),
    ("llama-3.2-3b", 3.2),
    ("mistral-7b", 7.2),
    ("qwen2.5-7b", 7.6),
    ("llama-3-8b", 8.0),
    ("llama-3.1-8b", 8.0),
    ("qwen3-8b", 8.2),
    ("gemma-2-9b", 9.2),
    ("gemma-3-12b", 12.2),
    ("llama-2-13b", 13.0),
    ("phi-4", 14.7),
    ("qwen2.5-14b", 14.8),
    ("mistral-small-24b", 23.6),
    ("gemma-2-27b", 27.2),
    ("qwen2.5-32b", 32.8),
    ("qwen3-32b", 32.8),
    ("mixtral-8x7b", 46.7),
    ("llama-3.1-70b", 70.6),
    ("qwen2.5-72b", 72.7),
]
PROVIDERS = ["aws", "gcp", "azure", "lambda", "runpod", "nebius", "cudo", "vast"]
GPUS = ["H100", "A100", "L40S", "B200", "H200", "A10G", "L4"]


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def varied_yaml(size: int, seed: int = 11) -> str:
    """Workloads whose every field is drawn on its own: kind, model, method, GPU range, deadline, the work as
    a drawn share of what the largest GPU count could do by it (so each can fit), sequence length, batch,
    estimate error, tolerance, provider/GPU/market rules and data location; binding per-provider quotas."""
    rng = random.Random(seed * 7919 + size)
    lines = [
        f"name: varied-{size}-{seed}",
        f"catalogs: [{', '.join(shipped_catalog_names())}]",
        "workloads:",
    ]
    for i in range(size):
        kind = rng.choice(["lora", "qlora", "full", "gen", "stated"])
        model, billions = rng.choice(
            VARIED_MODELS if kind != "full" else VARIED_MODELS[:16]
        )
        low = rng.choice([1, 1, 2, 4, 8])
        high = min(64, low * rng.choice([1, 2, 4, 8]))
        if kind == "full":
            high = max(high, 8 * math.ceil(billions / 8))
        elif kind in ("lora", "gen"):  # 16-bit weights on 80 GB GPUs
            high = max(high, math.ceil(billions / 32))
        budget = round(log_uniform(rng, 8, 400), 1)
        body = [
            f"  - name: {kind}-{i:05d}",
            f"    gpus: {{min: {low}, max: {high}}}",
            f"    time_budget: {budget}h",
        ]
        # work sized to take a drawn share of the budget on the largest GPU count (so the job can fit)
        share = log_uniform(rng, 0.01, 0.15)
        if kind in ("lora", "qlora", "full"):
            per_token = (6 if kind == "full" else 4) * billions * 1e9
            tokens = max(
                1, round(share * budget * 3600 * high * 300e12 / per_token / 1e6)
            )
            body += [
                "    kind: fine_tuning",
                f"    model: {model}",
                f"    method: {kind}",
                f"    work: {{tokens: {tokens}M}}",
                f"    sequence_length: {rng.choice([512, 1024, 2048, 4096, 8192])}",
            ]
        elif kind == "gen":
            out = rng.choice([64, 128, 256, 512, 1024])
            seqs = max(1, round(share * budget * 3600 * high * 1000 / out / 1000))
            body += [
                "    kind: batch_inference",
                f"    model: {model}",
                "    interruption_tolerance: stateless",
                f"    generation: {{sequences: {seqs}k, prompt_tokens: {rng.choice([128, 256, 512, 1024, 2048])}, "
                f"output_tokens: {out}, batch: {rng.choice([8, 16, 32, 64, 128, 256])}}}",
            ]
        else:
            states = round(log_uniform(rng, 8, 160 * high / 8))
            body += [
                "    kind: training",
                f"    memory: {{model_states: {states}GiB, activations: {rng.choice([2, 4, 8, 16])}GiB}}",
                f"    work: {{gpu_hours: {round(share * budget * high, 1)}, reference_gpu: A100-80GB}}",
                f"    interruption_tolerance: {rng.choice(['checkpointed', 'checkpointed', 'none'])}",
            ]
        if rng.random() < 0.3:
            body.append(
                f"    estimate_error: {rng.choice(['published', '5%', '15%', '25%'])}"
            )
        rule = rng.random()
        if rule < 0.1:
            body.append(
                f"    allow: {{providers: [{', '.join(rng.sample(PROVIDERS, rng.randint(2, 4)))}]}}"
            )
        elif rule < 0.2:
            body.append(f"    forbid: {{gpus: [{rng.choice(GPUS)}]}}")
        elif rule < 0.25:
            body.append("    forbid: {markets: [spot]}")
        elif rule < 0.3:
            body.append(
                f"    data: {{size: {rng.choice([50, 200, 1000])}GiB, location: {rng.choice(['aws/us-east-1', 'gcp/us-central1'])}}}"
            )
        lines += body
    scale = max(8, size // 2)
    lines.append("constraints:\n  gpu_quotas:")
    for provider, share in (
        ("aws", 4),
        ("azure", 2),
        ("gcp", 2),
        ("lambda", 2),
        ("runpod", 1),
        ("nebius", 1),
    ):
        lines.append(f"    {provider}: {scale * share}")
    return "\n".join(lines) + "\n"


CP_SAT_VARIANTS = {
    "default": {},
    "linearization_level=2": {"linearization_level": 2},
    "optimize_with_lb_tree_search": {"optimize_with_lb_tree_search": True},
}


def run_varied(
    size: int, time_limit: float = 60.0, variants: bool = False
) -> list[dict]:
    """One varied scenario: candidates once, then solved with and without the LP bound (and, with
    `variants`, CP-SAT alone under parameters meant to strengthen its own bound)."""
    # candidates of a re-run
    cache = Path(tempfile.gettempdir()) / f"planner-bench-varied-{size}.pickle"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "varied.yaml"
        path.write_text(varied_yaml(size))
        loaded = load_scenario(path)
        started = time.perf_counter()
        if cache.exists() and "--cached" in sys.argv:
            cands, candidates_s = pickle.loads(cache.read_bytes())
        else:
            cands = generate(loaded.scenario, loaded.catalog)
            candidates_s = time.perf_counter() - started
            cache.write_bytes(pickle.dumps((cands, candidates_s)))
    limits = limits_of(loaded.scenario)
    rows = []
    runs = [("default", False), ("default", True)] + (
        [(name, False) for name in CP_SAT_VARIANTS if name != "default"]
        if variants
        else []
    )
    for variant, use_lp in runs:
        model = build_model(cands.pruned, limits)
        result = solve_model(
            model,
            time_limit_s=time_limit,
            workers=2,
            use_lp=use_lp,
            parameters=CP_SAT_VARIANTS[variant],
        )
        rows.append(
            {
                "workloads": size,
                "lp_bound": "yes" if use_lp else "no",
                "cp_sat": variant,
                "candidates": len(cands.pruned),
                "infeasible": len(cands.infeasible),
                "candidates_s": round(candidates_s, 1),
                "status": result.status,
                "proved_by": result.proved_by or "-",
                "gap": f"{result.gap:.4%}",
                "objective_usd": round(result.objective_usd, 2),
                "bound_usd": round(result.bound_usd, 2),
                "solve_s": round(result.solve_seconds, 2),
                "lp_s": round(result.lp_seconds, 2),
                "deterministic_s": round(result.deterministic_seconds, 2),
            }
        )
        print(rows[-1], flush=True)
    return rows


def solve_command(path: Path, report: Path, *options: str) -> list[str]:
    """`planner solve` as a user runs it: start-up, load, candidates, solve, the JSON report."""
    return [
        sys.executable,
        "-m",
        "planner.cli",
        "solve",
        str(path),
        "--format",
        "json",
        "-o",
        str(report),
        *options,
    ]


def _solve_varied(size: int, seed: int, *options: str) -> tuple[str, dict]:
    """`planner solve` on `size` varied workloads in a fresh process, writing its report to a file with
    `options` (a format): the report's text and the process's wall, CPU and peak memory."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "varied.yaml"
        path.write_text(varied_yaml(size, seed))
        report = Path(folder) / "plan.out"
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "planner.cli",
                "solve",
                str(path),
                "-o",
                str(report),
                *options,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if not report.exists():
            raise SystemExit(
                f"planner solve failed on {size} workloads: {done.stderr[-2000:]}"
            )
        text = report.read_text()
    return text, {
        "end_to_end_s": round(wall, 1),
        "cpu_s": round(
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1
        ),
        "peak_gib": round(after.ru_maxrss / 2**20, 2),
    }


def run_command(size: int, seed: int = 11) -> dict:
    """`planner solve` on `size` varied workloads as a user runs it (a fresh process writing the JSON report):
    wall and CPU time, the candidates' share (building and pricing them), the solver's, peak memory, how many
    rows were priced exactly and how many were left unpriced."""
    text, run = _solve_varied(size, seed, "--format", "json")
    plan = json.loads(text)
    timing = plan["solve_report"]
    return {
        "workloads": size,
        "pricing": "lazy",
        "status": plan["status"],
        "infeasible": len(plan["infeasible"]),
        "objective_usd": plan["objective_usd"],
        "gap": _gap(plan["objective_usd"], plan["bound_usd"]),
        "end_to_end_s": run["end_to_end_s"],
        "cpu_s": run["cpu_s"],
        "candidates_s": timing["candidates_seconds"],
        "solver_s": timing["solve_seconds"],
        "priced": timing["candidates_priced"],
        "unpriced": timing["candidates_unpriced"],
        "peak_gib": run["peak_gib"],
    }


def run_table(size: int, seed: int = 11) -> dict:
    """`run_command`'s scenario planned by `planner solve FILE` with its table report, which prices no
    runner-ups: the same figures, read from the report's status line."""
    text, run = _solve_varied(size, seed)
    lines = text.splitlines()
    first = next(i for i, x in enumerate(lines) if x.split(":")[0].isupper())
    line = " ".join(lines[first:])  # the status line, wrapped to the terminal's width

    def number(pattern: str) -> float:
        found = re.search(pattern, line)
        return float(found[1].replace(",", "")) if found else 0.0

    return {
        "workloads": size,
        "pricing": "lazy, table report",
        "status": line.split(":")[0],
        "objective_usd": number(r"expected total \$([\d,.]+)"),
        "end_to_end_s": run["end_to_end_s"],
        "cpu_s": run["cpu_s"],
        "candidates_s": number(r"candidates built in ([\d.]+) s"),
        "solver_s": number(r"solved in ([\d.]+) s"),
        "priced": int(number(r"([\d,]+) rows priced exactly")),
        "unpriced": int(number(r"([\d,]+) left unpriced")),
        "peak_gib": run["peak_gib"],
    }


def run_every_row(size: int, seed: int = 11) -> dict:
    """The same scenario with every row priced (`make_plan(lazy=False)`, in this process): the reference the
    lazy plan must equal, and what lazy pricing saves."""
    from planner.solve.pipeline import make_plan

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "varied.yaml"
        path.write_text(varied_yaml(size, seed))
        started, cpu = time.perf_counter(), time.process_time()
        plan = make_plan(load_scenario(path), lazy=False)
        wall = time.perf_counter() - started
    r = plan.result
    return {
        "workloads": size,
        "pricing": "every row",
        "status": plan.status,
        "infeasible": len(plan.infeasible),
        "objective_usd": r.objective_usd if r else None,
        "gap": _gap(r.objective_usd, r.bound_usd) if r else "-",
        "end_to_end_s": round(wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "candidates_s": round(r.candidates_seconds, 3) if r else None,
        "solver_s": round(r.solve_seconds, 3) if r else None,
        "priced": r.priced if r else None,
        "unpriced": 0,
        "peak_gib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
        ),
    }


def _gap(objective: float | None, bound: float | None) -> str:
    return (
        f"{(objective - bound) / objective:.4%}"
        if objective and bound == bound
        else "-"
    )


def cheapest_on_demand(loaded) -> float:
    """Baseline (a): each workload's cheapest on-demand candidate, quotas ignored (spot removed
    from the offers, so candidate generation evaluates the on-demand market in full)."""
    on_demand_only = loaded.catalog.offers.assign(spot_usd_h=float("nan"))
    scenario = loaded.scenario.model_copy(
        update={
            "constraints": loaded.scenario.constraints.model_copy(
                update={"gpu_quotas": {}}
            )
        }
    )
    cands = generate(scenario, loaded.catalog, on_demand_only)
    return float(cands.pruned.groupby("workload")["cost_usd"].min().sum())


def greedy(cands: pd.DataFrame, quotas: dict[str, int]) -> float | None:
    """Largest workloads first (by their cheapest candidate's GPUs x hours), cheapest that fits."""
    left = dict(quotas)
    size = (
        cands.assign(gpu_h=cands["gpus"] * cands["wall_h"])
        .groupby("workload")["gpu_h"]
        .min()
    )
    total = 0.0
    options_of = dict(
        tuple(cands.sort_values(["cost_usd", "cid"]).groupby("workload", sort=False))
    )
    for workload in size.sort_values(ascending=False).index:
        for row in options_of[workload].itertuples(index=False):
            if row.provider not in left or left[row.provider] >= row.gpus:
                if row.provider in left:
                    left[row.provider] -= row.gpus
                total += row.cost_usd
                break
        else:
            return None
    return total


def cold_caches() -> None:
    """Forget the work kept from earlier sizes, so each size's phases are timed as a fresh process would."""
    from planner.physics.parallelism import best_layout

    best_layout.cache_clear()  # candidate generation's own caches last one call unless a caller keeps them


def run(size: int, quotas: bool) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.yaml"
        path.write_text(scenario_yaml(size, quotas))
        report = Path(folder) / "plan.json"
        started = time.perf_counter()
        subprocess.run(
            solve_command(path, report, "--time-limit", "60"),
            check=False,
            capture_output=True,
        )
        end_to_end = time.perf_counter() - started
        command = json.loads(report.read_text())
        cold_caches()
        started = time.perf_counter()
        loaded = load_scenario(path)
        loaded_at = time.perf_counter()
        cands = generate(loaded.scenario, loaded.catalog)
        generated_at = time.perf_counter()
    limits = limits_of(loaded.scenario)
    model = build_model(cands.pruned, limits)
    result = solve_model(model, time_limit_s=60.0, workers=2)
    alone = solve_model(
        build_model(cands.pruned, limits), time_limit_s=60.0, workers=2, use_lp=False
    )
    greedy_cost = greedy(cands.all, limits.gpu_quotas)
    return {
        "workloads": size,
        "quotas": "binding" if quotas else "none",
        "considered": cands.considered,
        "evaluated": len(cands.all),
        "after_pruning": len(cands.pruned),
        "load_s": round(loaded_at - started, 2),
        "candidates_s": round(generated_at - loaded_at, 2),
        "build_s": round(model.build_seconds, 2),
        "solve_s": round(result.solve_seconds, 2),
        "status": result.status,
        "proved_by": result.proved_by or "-",
        "gap": f"{result.gap:.4%}",
        "cp_sat_usd": round(result.objective_usd, 2),
        "on_demand_usd": round(cheapest_on_demand(loaded), 2),
        "greedy_usd": round(greedy_cost, 2) if greedy_cost is not None else None,
        "end_to_end_s": round(end_to_end, 2),
        "command_status": command["status"],
        "cp_sat_alone_s": round(alone.solve_seconds, 2),
        "cp_sat_alone_status": alone.status,
        "cp_sat_alone_gap": f"{alone.gap:.4%}",
        "ratio_to_cp_sat": round(end_to_end / alone.solve_seconds, 2),
    }


SHIPPED_RUN = """
import contextlib, importlib, io, json, pkgutil, sys, time
import ortools.sat.python.cp_model, pandas
import planner
from planner.cli import main
for module in pkgutil.walk_packages(planner.__path__, "planner."):
    importlib.import_module(module.name)
times = []
for _ in range(2):
    cpu, wall = time.process_time(), time.perf_counter()
    if sys.argv[2] == "api":
        status = planner.solve(sys.argv[1]).status
    else:  # the command's table report
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
            main(["solve", sys.argv[1]], standalone_mode=False)
        status = next(
            (l.split(":")[0] for l in out.getvalue().splitlines() if l.split(":")[0].isupper()), "?"
        )
    times += [time.process_time() - cpu, time.perf_counter() - wall]
print(json.dumps([status, *times]))
"""


def run_shipped() -> list[dict]:
    """Each shipped `planner solve` scenario (a calendar's are `planner batch`'s), planned in a fresh process
    after its imports, two ways: by the Python API (`planner.solve`, the JSON contract with its runner-ups)
    and by the command's table report (`planner solve FILE`, which prices no runner-ups): CPU and wall time
    of the first plan, and CPU of the same plan again."""
    rows = []
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "scenarios").glob("*.yaml")):
        text = path.read_text()
        if "\ncalendar:" in text or "\nruns:" in text:
            continue
        row: dict = {"scenario": path.stem}
        for how in ("api", "table"):
            out = subprocess.run(
                [sys.executable, "-c", SHIPPED_RUN, str(path), how],
                capture_output=True,
                text=True,
                cwd=root,
            )
            if out.returncode:
                row[f"{how}_status"] = out.stderr.strip()[-80:]
                continue
            status, cpu, wall, cpu_again, _ = json.loads(
                out.stdout.strip().splitlines()[-1]
            )
            row |= {
                f"{how}_status": status,
                f"{how}_first_cpu_s": round(cpu, 2),
                f"{how}_first_wall_s": round(wall, 2),
                f"{how}_again_cpu_s": round(cpu_again, 2),
            }
        rows.append(row)
        print(rows[-1], flush=True)
    return rows


def main(sizes: list[int]) -> None:
    rows = []
    for size in sizes:
        for quotas in (False, True):
            row = run(size, quotas)
            rows.append(row)
            print(row, flush=True)
    frame = pd.DataFrame(rows)
    print()
    print(frame.to_string(index=False))
    # the model is optimal in whole cents (each candidate's cost rounded, ties to the shorter run), so its plan
    # may cost up to a cent per workload more than greedy's in exact dollars, never more
    worse = frame[
        frame["greedy_usd"].notna()
        & (frame["cp_sat_usd"] > frame["greedy_usd"] + 0.01 * frame["workloads"])
    ]
    print(
        "\nCP-SAT never worse than greedy (beyond the cent rounding of each workload's cost):",
        worse.empty,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--varied"]:
        sizes = [int(a) for a in sys.argv[2:] if a.isdigit()] or [
            100,
            1000,
            10000,
            30000,
        ]
        table = []
        for size in sizes:
            table.append(run_command(size))
            print(table[-1], flush=True)
            if "--table" in sys.argv:  # the command's table report, no runner-ups
                table.append(run_table(size))
                print(table[-1], flush=True)
            if (
                "--every-row" in sys.argv
            ):  # the reference, in this process, after the command
                table.append(run_every_row(size))
                print(table[-1], flush=True)
        print()
        print(pd.DataFrame(table).to_string(index=False))
    elif sys.argv[1:2] == ["--shipped"]:
        table = run_shipped()
        print()
        print(pd.DataFrame(table).to_string(index=False))
    elif sys.argv[1:2] == ["--lp-bound"]:
        variants = "--variants" in sys.argv
        sizes = [int(a) for a in sys.argv[2:] if a.isdigit()] or [200, 1000]
        table = [row for size in sizes for row in run_varied(size, variants=variants)]
        print()
        print(pd.DataFrame(table).to_string(index=False))
    else:
        main([int(a) for a in sys.argv[1:]] or [10, 50, 200, 1000, 3000, 10000])
