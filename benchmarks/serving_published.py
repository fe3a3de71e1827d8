"""Hold the serving model against published serving benchmarks: time to first token, time per output token
and throughput at a stated concurrency or request rate.

    python benchmarks/serving_published.py [--markdown]

Each case names its source, the model, GPU, tensor-parallel degree, precisions, request size, the server's
scheduler and the load, and the published figure. The planner's figure comes from the step-level replay of
continuous batching (`planner.physics.batching.simulate`): clients in a closed loop at a fixed concurrency
(GenAI-Perf, AIPerf), Poisson arrivals at a rate (Triton's and SGLang's online benchmarks), or one batch sent
at once (vLLM's latency benchmark). Every ratio is planner over published for times, published over planner
for throughput (> 1: the planner is pessimistic). Targets (#42): every case within 1.5x and the median within
1.2x; the cases that still miss are listed in `MISSES` with the reason.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.load.catalog import load_gpus, load_models  # noqa: E402
from planner.physics import batching, serving  # noqa: E402
from planner.physics.hardware_shape import gpu_perf, model_shape  # noqa: E402

TARGET_EACH, TARGET_MEDIAN = 1.5, 1.2
TRT_ONLINE = (
    "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @258c7540 "
    "(Online Serving Measurements, TensorRT-LLM 0.14.0 + Triton, 500 requests)"
)
NIM = (
    "docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md (Llama-3.3-70b-instruct, NIM 1.8.0, "
    "2 x H100 80GB, FP8, TP2; GenAI-Perf at fixed concurrency)"
)
VLLM = "vLLM CI performance benchmark, latency test (fixed batch 8, 32 in / 128 out): buildkite.com/vllm/performance-benchmark/builds/{}"
BLOG = "johnmusgrave.com/p/vllm-throughput-latency-sweep-on (vLLM 0.23.0, --max-concurrency 1; 'about 75 tok/s')"
TRT_SERVER = batching.Scheduler(8192, 256, chunked=False)
"""TensorRT-LLM's in-flight batching as NIM and Triton ship it: max_num_tokens 8,192, whole prompts (context
chunking off by default)."""


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    model: str
    gpu: str
    tp: int
    precision: str
    kv_precision: str
    prompt: int
    output: int
    load: tuple[
        str, float
    ]  # ("rate", requests/s), ("concurrency", n) or ("batch", n): n sent at once
    metric: str  # ttft_ms (mean) | tpot_ms (mean) | e2e_ms | output_tokens_per_s
    published: float
    server: batching.Scheduler | None = None  # None: vLLM's defaults for the GPU


CASES = (
    Case(
        "trt-8b-h100-ttft",
        TRT_ONLINE,
        "llama-3.1-8b",
        "H100-SXM",
        1,
        "bf16",
        "bf16",
        467,
        256,
        ("rate", 2),
        "ttft_ms",
        23,
        TRT_SERVER,
    ),
    Case(
        "trt-8b-h100-tpot",
        TRT_ONLINE,
        "llama-3.1-8b",
        "H100-SXM",
        1,
        "bf16",
        "bf16",
        467,
        256,
        ("rate", 2),
        "tpot_ms",
        8,
        TRT_SERVER,
    ),
    Case(
        "trt-8b-h200-tpot",
        TRT_ONLINE,
        "llama-3.1-8b",
        "H200",
        1,
        "bf16",
        "bf16",
        467,
        256,
        ("rate", 2),
        "tpot_ms",
        6,
        TRT_SERVER,
    ),
    Case(
        "trt-70b-h100-tp4-tpot",
        TRT_ONLINE,
        "llama-3.1-70b",
        "H100-SXM",
        4,
        "bf16",
        "bf16",
        467,
        256,
        ("rate", 2),
        "tpot_ms",
        21,
        TRT_SERVER,
    ),
    Case(
        "trt-70b-h200-tp4-tpot",
        TRT_ONLINE,
        "llama-3.1-70b",
        "H200",
        4,
        "bf16",
        "bf16",
        467,
        256,
        ("rate", 2),
        "tpot_ms",
        18,
        TRT_SERVER,
    ),
    Case(
        "nim-70b-fp8-c1-500in-ttft",
        NIM,
        "llama-3.3-70b",
        "H100-SXM",
        2,
        "fp8",
        "fp8",
        500,
        2000,
        ("concurrency", 1),
        "ttft_ms",
        47.77,
        TRT_SERVER,
    ),
    Case(
        "nim-70b-fp8-c1-500in-tpot",
        NIM,
        "llama-3.3-70b",
        "H100-SXM",
        2,
        "fp8",
        "fp8",
        500,
        2000,
        ("concurrency", 1),
        "tpot_ms",
        18.91,
        TRT_SERVER,
    ),
    Case(
        "nim-70b-fp8-c5-500in-ttft",
        NIM,
        "llama-3.3-70b",
        "H100-SXM",
        2,
        "fp8",
        "fp8",
        500,
        2000,
        ("concurrency", 5),
        "ttft_ms",
        126.53,
        TRT_SERVER,
    ),
    Case(
        "vllm-8b-h200-b8",
        VLLM.format(9515),
        "llama-3.1-8b",
        "H200",
        1,
        "bf16",
        "bf16",
        32,
        128,
        ("batch", 8),
        "e2e_ms",
        833.421,
    ),
    Case(
        "vllm-70b-h200-tp4-b8",
        VLLM.format(9515),
        "llama-3-70b",
        "H200",
        4,
        "bf16",
        "bf16",
        32,
        128,
        ("batch", 8),
        "e2e_ms",
        2077.53,
    ),
    Case(
        "vllm-8b-a100-b8",
        VLLM.format(9523),
        "llama-3.1-8b",
        "A100-80GB",
        1,
        "bf16",
        "bf16",
        32,
        128,
        ("batch", 8),
        "e2e_ms",
        1579.27,
    ),
    Case(
        "vllm-70b-a100-tp4-b8",
        VLLM.format(9523),
        "llama-3-70b",
        "A100-80GB",
        4,
        "bf16",
        "bf16",
        32,
        128,
        ("batch", 8),
        "e2e_ms",
        3990.59,
    ),
    Case(
        "vllm-mixtral-a100-tp2-b8",
        VLLM.format(9523),
        "mixtral-8x7b",
        "A100-80GB",
        2,
        "bf16",
        "bf16",
        32,
        128,
        ("batch", 8),
        "e2e_ms",
        3643.84,
    ),
    Case(
        "vllm-8b-a100-40gb-c1-tpot",
        BLOG,
        "llama-3.1-8b",
        "A100-40GB",
        1,
        "bf16",
        "bf16",
        1024,
        128,
        ("concurrency", 1),
        "tpot_ms",
        1000 / 75,
    ),
) + tuple(
    Case(
        f"nim-70b-fp8-c{c}-5000in-{metric.split('_')[0]}",
        NIM,
        "llama-3.3-70b",
        "H100-SXM",
        2,
        "fp8",
        "fp8",
        5000,
        500,
        ("concurrency", c),
        metric,
        value,
        TRT_SERVER,
    )
    for c, ttft, itl, tokens in (
        (1, 406.77, 18.58, 51.67),
        (5, 546.7, 21.83, 218.48),
        (25, 688.69, 38.75, 623.4),
        (50, 834.51, 59.73, 814.37),
        (100, 7996.25, 92.91, 917.26),
        (150, 34794.22, 92.86, 920.9),
        (200, 61680.22, 93.06, 920.54),
        (250, 88605.32, 93.2, 920.12),
    )
    for metric, value in (
        ("ttft_ms", ttft),
        ("tpot_ms", itl),
        ("output_tokens_per_s", tokens),
    )
)
"""Precisions the vLLM CI and SGLang pages leave unstated are taken as bf16 (their default dtype);
the TensorRT-LLM online table is BF16; NIM's profile is FP8 weights, and its KV precision is assumed FP8."""


MISSES = {
    "nim-70b-fp8-c25-5000in-ttft": "prefill: one 5,000-token prompt takes 1.40x the published 407 ms (the fp8 "
    "compute rate is the training table's, 0.70 of the bf16 MFU), so at 25 clients "
    "the prompts queue behind each other longer",
    "nim-70b-fp8-c100-5000in-ttft": "KV admission: the server ran about 85 sequences at once (its throughput x "
    "ITL) where the model fits 94 at full context, so 100 clients queue less in "
    "the model",
    "nim-70b-fp8-c5-500in-ttft": "not explained: five clients of 500-token prompts and 2,000-token replies rarely "
    "overlap their prefills (0.1 request/s); the published 127 ms is 2.6x its own "
    "48 ms at one client",
}
"""Cases outside 1.5x, with the reason (tests/test_serving.py holds every other case to the target)."""


def replica(case: Case) -> serving.Replica:
    gpu = load_gpus()[case.gpu]
    return serving.Replica(
        model_shape(load_models()[case.model]),
        gpu_perf(gpu),
        case.tp,
        gpu.vram_gib,
        "nvlink" if case.tp > 1 else "none",
        gpu.nvlink_gbs,
        case.precision,
        case.kv_precision,
    )


def served(case: Case) -> batching.Served:
    how, amount = case.load
    load = {
        "rate": {"rate": amount},
        "concurrency": {"concurrency": int(amount)},
        "batch": {"concurrency": int(amount), "together": True},
    }[how]
    return batching.simulate(
        replica(case), case.prompt, case.output, scheduler=case.server, **load
    )


def planner_figure(case: Case) -> float:
    at = served(case)
    return {
        "ttft_ms": at.ttft() * 1e3,
        "tpot_ms": at.tpot() * 1e3,
        "e2e_ms": (at.ttft() + (case.output - 1) * at.tpot()) * 1e3,
        "output_tokens_per_s": at.output_tokens_per_s,
    }[case.metric]


def ratio(case: Case, planner: float) -> float:
    return (
        case.published / planner
        if case.metric == "output_tokens_per_s"
        else planner / case.published
    )


def _figure(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="the README's table")
    args = parser.parse_args()
    rows = [(c, planner_figure(c)) for c in CASES]
    ratios = [ratio(c, p) for c, p in rows]
    within = sum(1 / TARGET_EACH <= x <= TARGET_EACH for x in ratios)
    summary = (
        f"{len(rows)} cases: {within} within {TARGET_EACH}x, median ratio {statistics.median(ratios):.2f} "
        f"(target {TARGET_MEDIAN}x), range {min(ratios):.2f}-{max(ratios):.2f}"
    )
    if args.markdown:
        print("| case | load | metric | published | planner | ratio |")
        print("|---|---|---|---|---|---|")
        for (c, p), x in zip(rows, ratios):
            miss = " (miss)" if c.name in MISSES else ""
            print(
                f"| {c.name} | {c.load[0]} {c.load[1]:g} | {c.metric} | {_figure(c.published)} | {_figure(p)} | "
                f"{x:.2f}{miss} |"
            )
        print(
            f"\n{summary}. Misses: "
            + "; ".join(f"{name}: {why}" for name, why in MISSES.items())
            + "."
        )
        return
    for (c, p), x in zip(rows, ratios):
        print(
            f"{c.name:38s} {c.metric:20s} published {c.published:10.2f}  planner {p:10.2f}  ratio {x:5.2f}"
            + ("  MISS" if c.name in MISSES else "")
        )
        print(f"    {c.source}")
    print(summary)


if __name__ == "__main__":
    main()
