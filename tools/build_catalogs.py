#!/usr/bin/env python3
"""Build the shipped catalogs (catalogs/*.csv, catalogs/offers/*.csv) from the shared data.

Usage: python tools/build_catalogs.py [DATA_DIR]   (default: ../shared/data from the repo root)

Deterministic: rows are sorted and floats are written with a fixed format, so running it
twice gives byte-identical files.  Every rule applied here is documented in catalogs/README.md.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from planner.load.hf_architectures import decoder_params, moe_active, siglip_params  # noqa: E402  one counting rule
from planner.load.signals import INTERRUPTION_BUCKET_RATE  # noqa: E402  one rule
from planner.load.skypilot import (  # noqa: E402
    OFFER_COLUMNS,
    SPOT_PREEMPTION_DEFAULT,
    gpu_aliases,
    import_skypilot,
)

OUT = ROOT / "catalogs"

# ---------------------------------------------------------------- GPUs
GPU_COLUMNS = [
    "name",
    "family",
    "vendor",
    "vram_gib",
    "memory_type",
    "mem_bandwidth_gbs",
    "fp32_tflops",
    "fp16_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "int8_tops",
    "nvlink_gbs",
    "generation",
    "aliases",
    "source",
]

# shared gpus.csv name -> (canonical, family, generation, aliases)
SHARED_GPUS = {
    "H200 SXM": ("H200", "H200", "hopper", "H200;H200-SXM"),
    "H100 SXM": (
        "H100-SXM",
        "H100",
        "hopper",
        "H100;H100-SXM;H100-SXM5;H100-80GB;H100-MEGA;H100-NVLINK;NVIDIA-H100-80GB-HBM3",
    ),
    "H100 PCIe": ("H100-PCIe", "H100", "hopper", "H100-PCIE"),
    "H100 NVL": ("H100-NVL", "H100", "hopper", "H100-NVL"),
    "GH200": ("GH200", "GH200", "hopper", "GH200"),
    "B200 SXM": ("B200", "B200", "blackwell", "B200"),
    "A100 80GB SXM": ("A100-80GB", "A100", "ampere", "A100-80GB;A100-80GB-SXM"),
    "A100 40GB SXM": ("A100-40GB", "A100", "ampere", "A100;A100-40GB"),
    "A100 80GB PCIe": ("A100-80GB-PCIe", "A100", "ampere", "A100-80GB-PCIE"),
    "L40S": ("L40S", "L40S", "ada", "L40S"),
    "L40": ("L40", "L40", "ada", "L40"),
    "L4": ("L4", "L4", "ada", "L4"),
    "A10G": ("A10G", "A10", "ampere", "A10G"),
    "A10": ("A10", "A10", "ampere", "A10"),
    "A40": ("A40", "A40", "ampere", "A40"),
    "RTX 6000 Ada": ("RTX6000-Ada", "RTX6000-Ada", "ada", "RTX6000-Ada;RTX6000Ada"),
    "RTX A6000": ("RTXA6000", "RTXA6000", "ampere", "RTXA6000;A6000"),
    "RTX 4090": ("RTX4090", "RTX4090", "ada", "RTX4090"),
    "RTX 3090": ("RTX3090", "RTX3090", "ampere", "RTX3090"),
    "V100 SXM2 32GB": ("V100-32GB", "V100", "volta", "V100-32GB"),
    "V100 SXM2 16GB": ("V100-16GB", "V100", "volta", "V100;V100-16GB"),
    "V100 PCIe 32GB": ("V100-32GB-PCIe", "V100", "volta", "V100-32GB-PCIE"),
    "V100 PCIe 16GB": ("V100-16GB-PCIe", "V100", "volta", "V100-16GB-PCIE"),
    "T4": ("T4", "T4", "turing", "T4"),
    "MI300X": ("MI300X", "MI300X", "cdna3", "MI300X"),
    "MI250X": ("MI250X", "MI250X", "cdna2", "MI250X"),
}

# GPUs not in the shared gpus.csv (dense figures; empty = not supported / not published).
# name, family, vendor, vram_gib, memory_type, bw, fp32, fp16, bf16, fp8, int8, nvlink, gen, aliases, source
_N = "not in shared data; from "
EXTRA_GPUS = [
    (
        "A100-40GB-PCIe",
        "A100",
        "NVIDIA",
        40,
        "HBM2",
        1555,
        19.5,
        312,
        312,
        None,
        624,
        600,
        "ampere",
        "A100-40GB-PCIE",
        _N + "NVIDIA A100 PCIe 40GB datasheet (2020; NVLink bridge 600 GB/s, 250 W)",
    ),
    (
        "A800",
        "A800",
        "NVIDIA",
        80,
        "HBM2e",
        1935,
        19.5,
        312,
        312,
        None,
        624,
        400,
        "ampere",
        "A800",
        _N + "NVIDIA A800 80GB PCIe datasheet (A100 die, NVLink bridge 400 GB/s)",
    ),
    (
        "T4G",
        "T4",
        "NVIDIA",
        16,
        "GDDR6",
        320,
        8.1,
        65,
        None,
        None,
        130,
        None,
        "turing",
        "T4G",
        _N
        + "AWS EC2 G5g page (NVIDIA T4G = T4 silicon for Graviton hosts); T4 datasheet figures",
    ),
    (
        "P100",
        "P100",
        "NVIDIA",
        16,
        "HBM2",
        732,
        9.3,
        18.7,
        None,
        None,
        None,
        None,
        "pascal",
        "P100",
        _N
        + "NVIDIA Tesla P100 PCIe 16GB datasheet (FP16 = packed half precision, no tensor cores)",
    ),
    (
        "P4",
        "P4",
        "NVIDIA",
        8,
        "GDDR5",
        192,
        5.5,
        None,
        None,
        None,
        22,
        None,
        "pascal",
        "P4",
        _N + "NVIDIA Tesla P4 datasheet (INT8 22 TOPS; FP16 not accelerated)",
    ),
    (
        "M60",
        "M60",
        "NVIDIA",
        8,
        "GDDR5",
        160,
        4.8,
        None,
        None,
        None,
        None,
        None,
        "maxwell",
        "M60",
        _N
        + "NVIDIA Tesla M60 datasheet (board of 2 GPUs: 16 GB, 9.6 TFLOPS FP32, 320 GB/s; per GPU halved)",
    ),
    (
        "M4000",
        "M4000",
        "NVIDIA",
        8,
        "GDDR5",
        192,
        2.6,
        None,
        None,
        None,
        None,
        None,
        "maxwell",
        "M4000;GPU+",
        _N + "NVIDIA Quadro M4000 datasheet",
    ),
    (
        "P4000",
        "P4000",
        "NVIDIA",
        8,
        "GDDR5",
        243,
        5.3,
        None,
        None,
        None,
        None,
        None,
        "pascal",
        "P4000",
        _N + "NVIDIA Quadro P4000 datasheet",
    ),
    (
        "RTX6000",
        "RTX6000",
        "NVIDIA",
        24,
        "GDDR6",
        672,
        16.3,
        130.5,
        None,
        None,
        261,
        100,
        "turing",
        "RTX6000;QuadroRTX6000",
        _N
        + "NVIDIA Quadro RTX 6000 datasheet (Turing; tensor 130.5 TFLOPS FP16, INT8 261 TOPS; NVLink bridge 100 GB/s)",
    ),
    (
        "RTXA4000",
        "RTXA4000",
        "NVIDIA",
        16,
        "GDDR6",
        448,
        19.2,
        76.7,
        76.7,
        None,
        153.4,
        None,
        "ampere",
        "RTXA4000;A4000",
        _N
        + "NVIDIA RTX A4000 datasheet (tensor 153.4 TFLOPS sparse, halved; INT8 = 2x FP16 dense)",
    ),
    (
        "RTXA4500",
        "RTXA4500",
        "NVIDIA",
        20,
        "GDDR6",
        640,
        23.7,
        94.6,
        94.6,
        None,
        189.2,
        112.5,
        "ampere",
        "RTXA4500;A4500",
        _N
        + "NVIDIA RTX A4500 datasheet (tensor 189.2 TFLOPS sparse, halved; NVLink bridge 112.5 GB/s)",
    ),
    (
        "RTXA5000",
        "RTXA5000",
        "NVIDIA",
        24,
        "GDDR6",
        768,
        27.8,
        111.1,
        111.1,
        None,
        222.2,
        112.5,
        "ampere",
        "RTXA5000;A5000",
        _N
        + "NVIDIA RTX A5000 datasheet (tensor 222.2 TFLOPS sparse, halved; NVLink bridge 112.5 GB/s)",
    ),
    (
        "RTX4000-Ada",
        "RTX4000-Ada",
        "NVIDIA",
        20,
        "GDDR6",
        360,
        26.7,
        81.9,
        81.9,
        163.8,
        163.8,
        None,
        "ada",
        "RTX4000-Ada;RTX4000Ada",
        _N
        + "NVIDIA RTX 4000 Ada datasheet (tensor 327.6 TFLOPS = FP8 sparse; dense FP8 163.8, FP16 81.9)",
    ),
    (
        "RTX5090",
        "RTX5090",
        "NVIDIA",
        32,
        "GDDR7",
        1792,
        104.8,
        209.5,
        209.5,
        419,
        838,
        None,
        "blackwell",
        "RTX5090",
        _N
        + "NVIDIA RTX Blackwell GPU architecture whitepaper (GeForce RTX 5090; FP32-accumulate dense, as for RTX 4090)",
    ),
    (
        "RTXPRO6000-WS",
        "RTXPRO6000",
        "NVIDIA",
        96,
        "GDDR7",
        1792,
        125,
        500,
        500,
        1000,
        1000,
        None,
        "blackwell",
        "RTXPRO6000WS;RTXPRO6000-WS;RTXPRO6000",
        _N
        + "NVIDIA RTX PRO 6000 Blackwell Workstation datasheet (FP32 125 TFLOPS; 4000 AI TOPS = FP4 sparse, so FP8 dense ~1000, FP16 dense ~500: derived, approximate)",
    ),
    (
        "RTX3060",
        "RTX3060",
        "NVIDIA",
        12,
        "GDDR6",
        360,
        12.7,
        25.5,
        25.5,
        None,
        102,
        None,
        "ampere",
        "RTX3060",
        _N
        + "NVIDIA Ampere GA102/GA106 specs (GeForce RTX 3060; FP16/BF16 FP32-accumulate dense, INT8 dense)",
    ),
    (
        "RTX3070",
        "RTX3070",
        "NVIDIA",
        8,
        "GDDR6",
        448,
        20.3,
        40.6,
        40.6,
        None,
        162.6,
        None,
        "ampere",
        "RTX3070",
        _N
        + "NVIDIA Ampere GA102 whitepaper appendix (GeForce RTX 3070; FP32-accumulate dense)",
    ),
    (
        "RadeonProV520",
        "RadeonProV520",
        "AMD",
        8,
        "HBM2",
        512,
        7.4,
        14.7,
        None,
        None,
        None,
        None,
        "other",
        "Radeon Pro V520;RadeonProV520",
        _N
        + "AMD Radeon Pro V520 spec (Navi 12 / RDNA1; FP16 = packed, no matrix cores)",
    ),
    # China-market Hopper/Ada parts, AMD's MI300X refresh and Intel Gaudi 3 (all dense figures).
    (
        "H800",
        "H800",
        "NVIDIA",
        80,
        "HBM3",
        3350,
        67,
        989,
        989,
        1979,
        1979,
        400,
        "hopper",
        "H800;H800-SXM;H800-SXM5",
        _N
        + "NVIDIA H800 Tensor Core GPU datasheet (SXM5 column: H100 SXM's GH100 compute, sparse figures "
        "halved = 989 BF16/FP16, 1979 FP8/INT8; FP64 cut to ~1 TFLOPS; NVLink 400 GB/s bidirectional vs 900 on "
        "H100). Verified by search: same die and low-precision compute as H100 SXM, NVLink 400 GB/s "
        "(philisun.com and aiwiki.ai H800 articles). Not verified: 80 GB HBM3 at 3.35 TB/s (taken from H100 SXM; "
        "the H800 PCIe card is 80 GB HBM2e 2 TB/s and is not this row)",
    ),
    (
        "H20",
        "H20",
        "NVIDIA",
        96,
        "HBM3",
        4000,
        44,
        148,
        148,
        296,
        296,
        900,
        "hopper",
        "H20;HGX-H20",
        _N
        + "NVIDIA HGX H20 spec sheet (China-market Hopper, SXM, 400 W: 96 GB HBM3, 4.0 TB/s, BF16/FP16 148, "
        "FP8/INT8 296, TF32 74, FP32 44 TFLOPS dense, NVLink 900 GB/s). Verified by search: Tom's Hardware "
        "H20/L20/L2 spec table (Vipera listing, SemiAnalysis figures), tweaktown (H100 SXM 6.68x H20 on FP16 "
        "tensor = dense 989/148), zangshuxian.com (FP32 44, TF32 74). A 141 GB HBM3e variant also exists",
    ),
    (
        "L20",
        "L20",
        "NVIDIA",
        48,
        "GDDR6",
        864,
        59.8,
        119.5,
        119.5,
        239,
        239,
        None,
        "ada",
        "L20",
        _N
        + "NVIDIA L20 PCIe spec sheet (China-market AD102, 275 W, PCIe 4.0 x16, no NVLink: 48 GB GDDR6 ECC, "
        "864 GB/s, BF16/FP16 119.5, FP8/INT8 239, TF32 59.8 TFLOPS dense). Verified by search: Tom's Hardware "
        "H20/L20/L2 spec table; 864 GB/s, 48 GB GDDR6 (technical.city, topcpu.net). FP32 = the TF32 figure, as on "
        "the L40/Ada datasheets (11776 cores x 2.52 GHz x 2 = 59.35 per topcpu.net)",
    ),
    (
        "MI325X",
        "MI325X",
        "AMD",
        256,
        "HBM3e",
        6000,
        163.4,
        1307.4,
        1307.4,
        2614.9,
        2614.9,
        896,
        "cdna3",
        "MI325X",
        _N
        + "AMD Instinct MI325X datasheet (CDNA3, same compute as MI300X: FP32 163.4, FP16/BF16 1307.4, FP8 "
        "2614.9 dense (5229.8 sparse); 256 GB HBM3E, 6 TB/s; 7 Infinity Fabric links = 896 GB/s peak aggregate, "
        "as the MI300X row). Verified by search: awesomeagents.ai and aiwiki.ai MI325X spec pages (256 GB HBM3e, "
        "6 TB/s, FP16/BF16 1307.4, FP8 2614.9, FP32 163.4), wiaix.com (seven Infinity Fabric links). Not verified: "
        "INT8 (assumed = FP8, as on MI300X)",
    ),
    (
        "Gaudi3",
        "Gaudi3",
        "Intel",
        128,
        "HBM2e",
        3700,
        None,
        None,
        1835,
        1835,
        None,
        None,
        "other",
        "Gaudi3;Gaudi-3",
        _N
        + "Intel Gaudi 3 AI Accelerator white paper / Hot Chips 2024 spec table (OAM, 900 W air-cooled: BF16 "
        "and FP8 matrix 1835 TFLOPS, BF16 vector 28.7; 128 GB HBM2e, 3.67 TB/s = marketed 3.7 TB/s). Verified by "
        "search: the Hot Chips 2024 slides (sgpjbg.com copy) and yobitel.com. FP32/FP16/INT8 matrix rates not in "
        "the verified table: left empty. Scale-up is 24x 200 GbE RoCE on the chip (1200 GB/s bidirectional), not "
        "NVLink: nvlink_gbs empty. generation 'other' (the planner has no Gaudi generation)",
    ),
]
# A10G: NVIDIA publishes no tensor figures; the shared row leaves them empty.
A10G_FILL = {
    "fp32_tflops": 31.2,
    "fp16_tflops": 70,
    "bf16_tflops": 70,
    "int8_tops": 140,
}
A10G_SOURCE = (
    "; FP32/FP16/BF16/INT8 not in shared data; from baseten.co A10 vs A10G spec table "
    "(A10G ~70 TFLOPS FP16/BF16 tensor dense, 140 INT8 TOPS; approximate)"
)


def build_gpus(data: Path) -> pd.DataFrame:
    src = pd.read_csv(data / "gpus.csv")
    rows = []
    for _, r in src.iterrows():
        name, family, gen, aliases = SHARED_GPUS[r["gpu"]]
        row = {
            "name": name,
            "family": family,
            "vendor": r["vendor"],
            "vram_gib": r["vram_gb"],
            "memory_type": r["memory_type"],
            "mem_bandwidth_gbs": r["mem_bandwidth_gbps"],
            "fp32_tflops": r["fp32_tflops"],
            "fp16_tflops": r["fp16_tflops_dense"],
            "bf16_tflops": r["bf16_tflops_dense"],
            "fp8_tflops": r["fp8_tflops_dense"],
            "int8_tops": r["int8_tops_dense"],
            "nvlink_gbs": r["nvlink_gbps"],
            "generation": gen,
            "aliases": aliases,
            "source": f"shared data gpus.csv ({r['gpu']}): {r['source']}",
        }
        if name == "A10G":
            row.update(A10G_FILL)
            row["source"] += A10G_SOURCE
        rows.append(row)
    rows += [dict(zip(GPU_COLUMNS, e)) for e in EXTRA_GPUS]
    df = (
        pd.DataFrame(rows, columns=GPU_COLUMNS)
        .sort_values("name")
        .reset_index(drop=True)
    )
    alias_list = [a.upper() for s in df["aliases"] for a in s.split(";")] + list(
        df["name"].str.upper()
    )
    dup = {
        a
        for a in alias_list
        if alias_list.count(a) > 1 and a not in set(df["name"].str.upper())
    }
    assert not dup, f"ambiguous GPU aliases: {dup}"
    return df


# ---------------------------------------------------------------- models
MODEL_COLUMNS = [
    "name",
    "hf_repo",
    "params",
    "active_params",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn",
    "vocab",
    "max_context",
    "tied_embeddings",
    "experts",
    "experts_per_token",
    "expert_params",
    "source",
]
MODEL_SLUGS = {
    "GPT-2 (124M)": "gpt2",
    "GPT-2 XL (1.5B)": "gpt2-xl",
    "Mistral-7B-v0.1": "mistral-7b",
    "Mixtral-8x7B-v0.1": "mixtral-8x7b",
}
# MoE columns for shared-data rows (not in the shared file): name -> (experts, experts_per_token,
# expert_params).  Mixtral: 32 layers x 8 experts x SwiGLU 3 x 4096 x 14336 (HF config.json).
SHARED_MOE = {"mixtral-8x7b": (8, 2, 32 * 8 * 3 * 4096 * 14336)}
SHARED_MOE_SOURCE = (
    "; experts/experts_per_token/expert_params from HF config.json (num_local_experts 8, "
    "num_experts_per_tok 2; 32 x 8 x 3 x 4096 x 14336)"
)


# DeepSeek-V3 (config.json): MLA per layer = q_a 7168x1536 + norm + q_b 1536x(128 x 192) + kv_a 7168x(512+64)
# + norm + kv_b 512x(128 x (128+128)) + o (128 x 128)x7168; 3 dense layers (18432), 58 MoE layers of
# 256 routed + 1 shared expert (2048) + router 256x7168 (+256 bias); MTP module (num_nextn_predict_layers) excluded.
_DSV3_MLA = (
    7168 * 1536
    + 1536
    + 1536 * 128 * 192
    + 7168 * 576
    + 512
    + 512 * 128 * 256
    + 128 * 128 * 7168
)
_DSV3_EXPERTS = 58 * 256 * 3 * 7168 * 2048
_DSV3_PARAMS = (
    129280 * 7168 * 2
    + 61 * (_DSV3_MLA + 2 * 7168)
    + 3 * 3 * 7168 * 18432
    + 58 * (3 * 7168 * 2048 + 256 * 7168 + 256)
    + _DSV3_EXPERTS
    + 7168
)
# Qwen3-30B-A3B (config.json): 48 MoE layers, 128 experts of 768, router 128x2048, QK norm.
_Q3MOE_EXPERTS = 48 * 128 * 3 * 2048 * 768
_Q3MOE_PARAMS = decoder_params(
    151936,
    2048,
    48,
    32,
    4,
    128,
    0,
    False,
    qk_norm=True,
    extra=48 * 128 * 2048 + _Q3MOE_EXPERTS,
)
# + multi_modal_projector (1152 x hidden) and its 1152 norm
_GEMMA3_VISION = siglip_params()

_NM = "not in shared data; "
_CK = "; config values checked by search against published copies of config.json"
EXTRA_MODELS = [
    dict(
        name="deepseek-v3",
        hf_repo="deepseek-ai/DeepSeek-V3",
        params=_DSV3_PARAMS,
        active_params=moe_active(_DSV3_PARAMS, 256, 8, _DSV3_EXPERTS),
        layers=61,
        hidden=7168,
        heads=128,
        kv_heads=1,
        head_dim=288,
        ffn=2048,
        vocab=129280,
        max_context=131072,
        tied_embeddings=False,
        experts=256,
        experts_per_token=8,
        expert_params=_DSV3_EXPERTS,
        source=_NM
        + "HF config.json (deepseek-ai/DeepSeek-V3: 61 layers, hidden 7168, 128 heads, q_lora_rank "
        "1536, kv_lora_rank 512, qk_nope/qk_rope/v_head_dim 128/64/128, first_k_dense_replace 3 with "
        "intermediate_size 18432, 256 routed + 1 shared expert, moe_intermediate_size 2048, 8 per token, "
        "vocab 129280, max_position_embeddings 163840) + DeepSeek-V3 technical report (arXiv:2412.19437: "
        "671B total, 37B active, 128K context); note: MLA caches kv_lora_rank + qk_rope_head_dim = 512 + 64 = "
        "576 elements per token per layer, written as kv_heads 1 x head_dim 288 (2 x 1 x 288 = 576; not the "
        "attention head width); ffn = one routed expert's width (dense layers 18432); params computed from "
        "the config for the main model (the paper's 671B; the HF checkpoint's 685B adds the MTP module); "
        "active = params less unused routed experts, incl. embeddings (paper: 37B)"
        + _CK,
    ),
    dict(
        name="qwen3-30b-a3b",
        hf_repo="Qwen/Qwen3-30B-A3B",
        params=_Q3MOE_PARAMS,
        active_params=moe_active(_Q3MOE_PARAMS, 128, 8, _Q3MOE_EXPERTS),
        layers=48,
        hidden=2048,
        heads=32,
        kv_heads=4,
        head_dim=128,
        ffn=768,
        vocab=151936,
        max_context=40960,
        tied_embeddings=False,
        experts=128,
        experts_per_token=8,
        expert_params=_Q3MOE_EXPERTS,
        source=_NM
        + "HF config.json (Qwen/Qwen3-30B-A3B: num_experts 128, num_experts_per_tok 8, "
        "moe_intermediate_size 768, no shared expert, head_dim 128, QK norm, max_position_embeddings 40960) "
        "+ Qwen3 model card (30.5B total, 3.3B active, 32768 native context, 131072 with YaRN); note: params "
        "computed from config; ffn = one expert's width" + _CK,
    ),
    dict(
        name="llama-3.2-1b",
        hf_repo="meta-llama/Llama-3.2-1B",
        params=decoder_params(128256, 2048, 16, 32, 8, 64, 8192, True),
        layers=16,
        hidden=2048,
        heads=32,
        kv_heads=8,
        head_dim=64,
        ffn=8192,
        vocab=128256,
        max_context=131072,
        tied_embeddings=True,
        source=_NM
        + "HF config.json (head_dim 64, tie_word_embeddings true, rope_scaling llama3 factor 32) "
        "+ Llama 3.2 model card (1.23B); note: params computed from config" + _CK,
    ),
    dict(
        name="llama-3.2-3b",
        hf_repo="meta-llama/Llama-3.2-3B",
        params=decoder_params(128256, 3072, 28, 24, 8, 128, 8192, True),
        layers=28,
        hidden=3072,
        heads=24,
        kv_heads=8,
        head_dim=128,
        ffn=8192,
        vocab=128256,
        max_context=131072,
        tied_embeddings=True,
        source=_NM
        + "HF config.json (tie_word_embeddings true, rope_scaling llama3 factor 32) + Llama 3.2 "
        "model card (3.21B); note: params computed from config" + _CK,
    ),
    dict(
        name="llama-3.3-70b",
        hf_repo="meta-llama/Llama-3.3-70B-Instruct",
        params=decoder_params(128256, 8192, 80, 64, 8, 128, 28672, False),
        layers=80,
        hidden=8192,
        heads=64,
        kv_heads=8,
        head_dim=128,
        ffn=28672,
        vocab=128256,
        max_context=131072,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (same shape as Llama-3.1-70B; only an Instruct checkpoint is published) "
        "+ Llama 3.3 model card (70B, 128K context); note: params computed from config = the Llama-3.1-70B "
        "count; this config was not re-fetched here",
    ),
    dict(
        name="qwen2.5-14b",
        hf_repo="Qwen/Qwen2.5-14B",
        params=decoder_params(
            152064, 5120, 48, 40, 8, 128, 13824, False, qkv_bias=True
        ),
        layers=48,
        hidden=5120,
        heads=40,
        kv_heads=8,
        head_dim=128,
        ffn=13824,
        vocab=152064,
        max_context=131072,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (base max_position_embeddings 131072) + Qwen2.5 model card (14.7B, "
        "13.1B non-embedding); note: QKV bias; params computed from config; Instruct config ships 32768 + YaRN"
        + _CK,
    ),
    dict(
        name="qwen2.5-32b",
        hf_repo="Qwen/Qwen2.5-32B",
        params=decoder_params(
            152064, 5120, 64, 40, 8, 128, 27648, False, qkv_bias=True
        ),
        layers=64,
        hidden=5120,
        heads=40,
        kv_heads=8,
        head_dim=128,
        ffn=27648,
        vocab=152064,
        max_context=131072,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (base max_position_embeddings 131072) + Qwen2.5 model card (32.5B, "
        "31.0B non-embedding); note: QKV bias; params computed from config; Instruct config ships 32768 + YaRN"
        + _CK,
    ),
    dict(
        name="qwen3-8b",
        hf_repo="Qwen/Qwen3-8B",
        params=decoder_params(151936, 4096, 36, 32, 8, 128, 12288, False, qk_norm=True),
        layers=36,
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        ffn=12288,
        vocab=151936,
        max_context=40960,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (head_dim 128, QK norm, max_position_embeddings 40960) + Qwen3 model card "
        "(8.2B; 32768 native context, 131072 with YaRN); note: params computed from config"
        + _CK,
    ),
    dict(
        name="qwen3-32b",
        hf_repo="Qwen/Qwen3-32B",
        params=decoder_params(151936, 5120, 64, 64, 8, 128, 25600, False, qk_norm=True),
        layers=64,
        hidden=5120,
        heads=64,
        kv_heads=8,
        head_dim=128,
        ffn=25600,
        vocab=151936,
        max_context=40960,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (64 heads x head_dim 128 > hidden 5120, QK norm, max_position_embeddings "
        "40960) + Qwen3 model card (32.8B; 32768 native, 131072 with YaRN); note: params computed from config"
        + _CK,
    ),
    dict(
        name="gemma-3-27b",
        hf_repo="google/gemma-3-27b-pt",
        params=decoder_params(
            262208,
            5376,
            62,
            32,
            16,
            128,
            21504,
            True,
            qk_norm=True,
            norms_per_layer=4,
            extra=_GEMMA3_VISION + 1152 * 5376 + 1152,
        ),
        layers=62,
        hidden=5376,
        heads=32,
        kv_heads=16,
        head_dim=128,
        ffn=21504,
        vocab=262208,
        max_context=131072,
        tied_embeddings=True,
        source=_NM
        + "HF config.json (text_config: head_dim 128, query_pre_attn_scalar 168, sliding_window "
        "1024, sliding_window_pattern 6; vision_config: SigLIP 27 x 1152, 896 px) + Gemma 3 technical report "
        "(27B, 128K context); note: 5 local (1024-token window) : 1 global attention; params computed from "
        "config incl. the 417M vision tower and projector (text decoder alone 27,009,346,304)"
        + _CK,
    ),
    dict(
        name="gemma-3-12b",
        hf_repo="google/gemma-3-12b-pt",
        params=decoder_params(
            262208,
            3840,
            48,
            16,
            8,
            256,
            15360,
            True,
            qk_norm=True,
            norms_per_layer=4,
            extra=_GEMMA3_VISION + 1152 * 3840 + 1152,
        ),
        layers=48,
        hidden=3840,
        heads=16,
        kv_heads=8,
        head_dim=256,
        ffn=15360,
        vocab=262208,
        max_context=131072,
        tied_embeddings=True,
        source=_NM
        + "HF config.json (text_config: head_dim 256, sliding_window 1024, sliding_window_pattern 6; "
        "vision_config: SigLIP 27 x 1152, 896 px) + Gemma 3 technical report (12B, 128K context); note: 5 local "
        "(1024-token window) : 1 global attention; params computed from config incl. the 417M vision tower and "
        "projector (text decoder alone 11,766,034,176)" + _CK,
    ),
    dict(
        name="phi-4",
        hf_repo="microsoft/phi-4",
        params=decoder_params(100352, 5120, 40, 40, 10, 128, 17920, False),
        layers=40,
        hidden=5120,
        heads=40,
        kv_heads=10,
        head_dim=128,
        ffn=17920,
        vocab=100352,
        max_context=16384,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (Phi3ForCausalLM: 40 heads / 10 KV, fused qkv and gate_up, "
        "max_position_embeddings 16384) + Phi-4 technical report / model card (14B); note: params computed "
        "from config" + _CK,
    ),
    dict(
        name="mistral-small-24b",
        hf_repo="mistralai/Mistral-Small-24B-Base-2501",
        params=decoder_params(131072, 5120, 40, 32, 8, 128, 32768, False),
        layers=40,
        hidden=5120,
        heads=32,
        kv_heads=8,
        head_dim=128,
        ffn=32768,
        vocab=131072,
        max_context=32768,
        tied_embeddings=False,
        source=_NM
        + "HF config.json (head_dim 128: 32 heads x 128 = 4096 < hidden 5120, Tekken vocab 131072, "
        "max_position_embeddings 32768) + Mistral Small 3 model card (24B, 32k context); note: params "
        "computed from config" + _CK,
    ),
]


def build_models(data: Path) -> pd.DataFrame:
    m = pd.read_csv(data / "models.csv", keep_default_na=False)
    m["name"] = [MODEL_SLUGS.get(x, x.lower()) for x in m["model"]]
    m["ffn"] = m["intermediate_size"]
    m["source"] = [
        f"shared data models.csv ({mo}): {s}" + (f"; note: {n}" if n else "")
        for mo, s, n in zip(m["model"], m["source"], m["notes"])
    ]
    for col, i in (("experts", 0), ("experts_per_token", 1), ("expert_params", 2)):
        m[col] = [SHARED_MOE[n][i] if n in SHARED_MOE else None for n in m["name"]]
    m["source"] = [
        s + SHARED_MOE_SOURCE if n in SHARED_MOE else s
        for n, s in zip(m["name"], m["source"])
    ]
    # the parameter formula reproduces the shared rows it applies to (Llama 3.1 70B; Qwen2.5 with QKV bias)
    shared = dict(zip(m["name"], m["params"]))
    assert (
        decoder_params(128256, 8192, 80, 64, 8, 128, 28672, False)
        == shared["llama-3.1-70b"]
    )
    assert (
        decoder_params(152064, 3584, 28, 28, 4, 128, 18944, False, qkv_bias=True)
        == shared["qwen2.5-7b"]
    )
    extra = [
        dict(e, active_params=e.get("active_params", e["params"])) for e in EXTRA_MODELS
    ]  # dense: = params
    out = pd.DataFrame(
        m[MODEL_COLUMNS].to_dict("records") + extra, columns=MODEL_COLUMNS
    )
    assert out["name"].is_unique
    return out.sort_values("name").reset_index(drop=True)


# ---------------------------------------------------------------- providers
PROVIDER_COLUMNS = [
    "provider",
    "billing_granularity_s",
    "billing_minimum_s",
    "storage_usd_per_gib_month",
    "egress_usd_per_gib",
    "spot_preemption_per_node_h",
    "source",
    "as_of",
    "defaults",
    "notes",
]
# provider: (granularity, minimum, storage, egress, defaults, notes)
# Storage/egress are list prices known from the providers' pricing pages (not in the data).
PROVIDER_FACTS = {
    "aws": (
        1,
        60,
        0.023,
        0.09,
        "storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv (verified); storage = S3 Standard first tier, egress = internet first 10 TB tier",
    ),
    "gcp": (
        1,
        60,
        0.020,
        0.12,
        "storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv (partial: per-second/1-min from a secondary source); storage = GCS Standard regional, egress = premium tier worldwide first TB",
    ),
    "azure": (
        1,
        60,
        0.018,
        0.087,
        "storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv (partial: per-second/60 s from a third-party blog); storage = Blob hot LRS, egress = internet first 10 TB",
    ),
    "lambda": (
        60,
        60,
        0.20,
        0.0,
        "billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv: 1-minute increments, no minimum stated (one increment assumed); storage = Lambda persistent filesystem; no egress fees",
    ),
    "runpod": (
        1,
        0,
        0.07,
        0.0,
        "billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv: per second, no minimum stated (0 assumed); storage = network volume; no egress fees",
    ),
    "vast": (
        1,
        0,
        0.15,
        0.0,
        "billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv (partial): per second, no minimum stated; storage and bandwidth are priced per host on Vast, values are rough typical figures",
    ),
    "nebius": (
        60,
        60,
        0.10,
        0.0,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv: granularity not found, per-minute with 1-minute minimum assumed; storage/egress assumed",
    ),
    "cudo": (
        60,
        60,
        0.10,
        0.0,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "not in billing_facts.csv: per-minute with 1-minute minimum assumed; storage/egress assumed",
    ),
    "hyperbolic": (
        60,
        60,
        0.10,
        0.0,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "not in billing_facts.csv: per-minute with 1-minute minimum assumed; storage/egress assumed",
    ),
    "fluidstack": (
        60,
        60,
        0.10,
        0.0,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv: not found; per-minute with 1-minute minimum assumed; storage/egress assumed",
    ),
    "paperspace": (
        60,
        60,
        0.10,
        0.0,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "billing_facts.csv: not found; per-minute with 1-minute minimum assumed; storage/egress assumed",
    ),
    "do": (
        60,
        60,
        0.10,
        0.01,
        "billing_granularity_s;billing_minimum_s;storage_usd_per_gib_month;egress_usd_per_gib",
        "not in billing_facts.csv: per-minute with 1-minute minimum assumed; storage = DO block storage volumes, egress = bandwidth overage",
    ),
}

# offers source: provider -> (repo path, commit)   (from shared/data/README.md)
OFFER_SOURCES = {
    "aws": ("catalogs/v8/aws/vms.csv", "e385a0d348eda9cefd9806423e7725944dc249e4"),
    "lambda": (
        "catalogs/v8/lambda/vms.csv",
        "95eaf484fa404db8356b745607d162ea4fdf8fda",
    ),
    "nebius": (
        "catalogs/v8/nebius/vms.csv",
        "0082b0435f3912ae4c566856b272455cc78f4f61",
    ),
    "gcp": ("catalogs/v8/gcp/vms.csv", "8427bbff988abdd050a9f51addd314ef31cb4e85"),
    "azure": ("catalogs/v6/azure/vms.csv", "098741e70562f65d7af1cceb81e33b284f742604"),
    "runpod": (
        "catalogs/v7/runpod/vms.csv",
        "0727c2bd9e77f91cb1377127c5f793a28cf01384",
    ),
    "cudo": ("catalogs/v8/cudo/vms.csv", "e280db6c2d70d4828c039527b027ea3a14a88073"),
    "vast": ("catalogs/v8/vast/vms.csv", "680a69b15e686d34fd0c808ddc62c10df27bb46d"),
    "hyperbolic": (
        "catalogs/v8/hyperbolic/vms.csv",
        "0082b0435f3912ae4c566856b272455cc78f4f61",
    ),
    "fluidstack": (
        "catalogs/v6/fluidstack/vms.csv",
        "7dc0cfecf3fa803eb48606a82258bfda657c53bc",
    ),
    "paperspace": (
        "catalogs/v6/paperspace/vms.csv",
        "e520054145d1bce6748bcf18c9a25ddd6ea9a348",
    ),
    "do": ("catalogs/v6/do/vms.csv", "a66ac219187867b41de75bde7aef5c5006e0b1ef"),
}


def build_providers() -> pd.DataFrame:
    rows = []
    for p, (gran, mini, sto, egr, dflt, note) in PROVIDER_FACTS.items():
        path, sha = OFFER_SOURCES[p]
        rows.append(
            {
                "provider": p,
                "billing_granularity_s": gran,
                "billing_minimum_s": mini,
                "storage_usd_per_gib_month": sto,
                "egress_usd_per_gib": egr,
                "spot_preemption_per_node_h": SPOT_PREEMPTION_DEFAULT.get(p),
                "source": f"shared data billing_facts.csv; offers: skypilot-org/skypilot-catalog {path}@{sha[:12]}",
                "as_of": SNAPSHOT_DATE,
                "defaults": dflt
                + (
                    ";spot_preemption_per_node_h"
                    if p in SPOT_PREEMPTION_DEFAULT
                    else ""
                ),
                "notes": note,
            }
        )
    return (
        pd.DataFrame(rows, columns=PROVIDER_COLUMNS)
        .sort_values("provider")
        .reset_index(drop=True)
    )


# ---------------------------------------------------------------- per-offer GPU resolution
def resolve_gpu(provider: str):
    """Per-provider resolution of names whose meaning depends on provider/instance/memory."""

    def f(it: str, name: str, mib: float):
        it_l = it.lower()
        if provider == "runpod":
            return {
                "H100": "H100-PCIe",
                "A100-80GB": "A100-80GB-PCIe",
                "A100-80GB-SXM": "A100-80GB",
                "H200-SXM": "H200",
            }.get(name)
        if provider == "lambda":
            if it_l == "gpu_1x_h100_pcie":
                return "H100-PCIe"
            if (
                it_l == "gpu_1x_a100"
            ):  # Lambda's non-"sxm4" 1x A100 is the 40 GB PCIe card
                return "A100-40GB-PCIe"
        if provider == "azure":
            if "_h100_v5" in it_l and it_l.startswith("standard_nc"):
                return "H100-NVL"  # NC H100 v5 = H100 NVL 94 GB
            if it_l.startswith("standard_nc") and it_l.endswith("_a100_v4"):
                return "A100-80GB-PCIe"  # NC A100 v4 = PCIe cards
            if it_l.endswith("s_v3") and name == "V100":
                return "V100-16GB-PCIe"  # NCv3 = V100 PCIe
        if provider == "cudo":
            if name == "A100":  # 'a100-pcie'/'a100-pci' types carry 81920 MiB
                return "A100-80GB-PCIe"
            if name == "V100":
                return "V100-16GB-PCIe"
        if provider == "fluidstack" and "pcie" in it_l and name.startswith("A100"):
            return "A100-80GB-PCIe"
        if provider == "vast":
            if name == "A100":
                return (
                    "A100-80GB-PCIe"
                    if "pcie" in it_l
                    else ("A100-80GB" if mib > 50000 else "A100-40GB")
                )
            if name == "H100":
                return "H100-NVL" if "nvl" in it_l else "H100-SXM"
            if name == "V100":  # marketplace V100s: no SXM evidence, assume PCIe
                return "V100-32GB-PCIe" if mib > 20000 else "V100-16GB-PCIe"
        return None

    return f


# ---------------------------------------------------------------- interconnect from instance_families.csv
# instance_type (or regex) -> (intra, intra_gbs, inter, inter_gbps, note); values from
# instance_families.csv, with ranges resolved per size as stated in its note column.
def families_table(data: Path) -> list[tuple]:
    fam = pd.read_csv(data / "instance_families.csv", dtype=str, keep_default_na=False)
    out = []
    size_split = {  # rows whose gbps is a range: per-size value from the row's note
        ("aws", "g6e.12xlarge/24xlarge"): {"g6e.12xlarge": 100, "g6e.24xlarge": 200},
        ("aws", "g5.12xlarge/24xlarge"): {"g5.12xlarge": 40, "g5.24xlarge": 50},
    }
    for _, r in fam.iterrows():
        key = (r["provider"], r["family_or_instance_pattern"])
        intra = (
            "pcie"
            if r["intra_node"] in ("none", "pcie", "infinity_fabric")
            else r["intra_node"]
        )
        gbs = (
            float(r["intra_node_gbps_per_gpu"])
            if r["intra_node_gbps_per_gpu"]
            else None
        )
        pats = [
            x.strip().split(" ")[0] for x in r["family_or_instance_pattern"].split("/")
        ]
        pat = pats[0]
        if key in size_split:
            for it, g in size_split[key].items():
                out.append(
                    (r["provider"], re.escape(it), intra, gbs, r["inter_node"], g)
                )
            continue
        gbps = r["inter_node_gbps"]
        gbps = float(gbps) if re.fullmatch(r"[0-9.]+", gbps or "") else None
        if (
            key == ("aws", "g5.xlarge-16xlarge")
            or key == ("gcp", "n1 + V100 (8 GPUs)")
            or key[0] == "azure"
            and "NC" in key[1]
            or key[0] == "nebius"
            and "l40s" in key[1]
        ):
            continue  # ranges / patterns without a usable number: handled by default rules
        if key[0] == "lambda" and len(pats) > 1:
            continue  # single-GPU Lambda row: defaults give the same (pcie, ethernet)
        if len(pats) > 1:  # nebius h100/h200 row
            for p in pats:
                out.append(
                    (
                        r["provider"],
                        re.escape(p) + ".*",
                        intra,
                        gbs,
                        r["inter_node"],
                        gbps,
                    )
                )
            continue
        if key[0] == "azure":
            pat = "Standard_" + pat
        out.append(
            (
                r["provider"],
                re.escape(pat) + (".*" if key[0] == "nebius" else ""),
                intra,
                gbs,
                r["inter_node"],
                gbps,
            )
        )
    return out


# Interconnect facts not in instance_families.csv (from provider docs; listed in `defaults`).
EXTRA_INTERCONNECT = [
    (
        "azure",
        r"Standard_ND40rs_v2",
        "nvlink",
        300.0,
        "infiniband",
        100.0,
        "ib_from_provider_docs",
    ),
    (
        "azure",
        r"Standard_NC24rs_v3",
        "pcie",
        32.0,
        "infiniband",
        56.0,
        "ib_from_provider_docs",
    ),
]


def apply_interconnect(
    off: pd.DataFrame, provider: str, fam: list[tuple]
) -> pd.DataFrame:
    for i, r in off.iterrows():
        dflt = [x for x in r["defaults"].split(";") if x]
        notes = [x for x in r["notes"].split(";") if x]
        hit = next(
            (
                f
                for f in fam
                if f[0] == provider and re.fullmatch(f[1], r["instance_type"])
            ),
            None,
        )
        if hit:
            _, _, intra, gbs, inter, gbps = hit
            if r["gpus_per_node"] == 1:
                intra, gbs = "pcie", None
            off.at[i, "intra_node"] = intra
            if gbs is not None:
                off.at[i, "intra_node_gbs"] = gbs
                dflt.remove("intra_node_gbs")
            dflt.remove("intra_node")
            off.at[i, "inter_node"] = inter
            dflt.remove("inter_node")
            if gbps is not None:
                off.at[i, "inter_node_gbps"] = gbps
                if "inter_node_gbps" in dflt:
                    dflt.remove("inter_node_gbps")
            elif "inter_node_gbps" not in dflt:
                dflt.append("inter_node_gbps")
        extra = next(
            (
                e
                for e in EXTRA_INTERCONNECT
                if e[0] == provider and re.fullmatch(e[1], r["instance_type"])
            ),
            None,
        )
        if extra:
            off.at[i, "intra_node"], off.at[i, "intra_node_gbs"] = extra[2], extra[3]
            off.at[i, "inter_node"], off.at[i, "inter_node_gbps"] = extra[4], extra[5]
            notes.append(extra[6])
        if r["gpu"] == "MI300X" and r["gpus_per_node"] > 1:
            notes.append("amd_infinity_fabric_as_pcie")
        order = [c for c in OFFER_COLUMNS if c in dflt]
        off.at[i, "defaults"] = ";".join(order)
        off.at[i, "notes"] = ";".join(notes)
    return off


# ---------------------------------------------------------------- AWS spot preemption
# Spot Advisor bucket index -> preemptions per node-hour.  Linear in the bucket's
# mid-point (2.5, 7.5, 12.5, 17.5, 25 %), anchored so that bucket 4 (">20%", where
# every p3.2xlarge region sits) = 0.47/node-h, the pooled measured p3.2xlarge rate.
AWS_BUCKET_RATE = INTERRUPTION_BUCKET_RATE  # one home: planner/load/signals.py


def apply_aws_preemption(off: pd.DataFrame, data: Path) -> pd.DataFrame:
    adv = pd.read_csv(data / "spot_interruption_aws.csv")
    bucket = {
        (r.region, r.instance_type): int(r.interruption_bucket_index)
        for r in adv.itertuples()
    }
    for i, r in off.iterrows():
        b = bucket.get((r["region"], r["instance_type"]))
        if b is None or not (r["spot_usd_h"] > 0):
            continue
        off.at[i, "spot_preemption_per_h"] = AWS_BUCKET_RATE[b]
        off.at[i, "defaults"] = ";".join(
            x for x in r["defaults"].split(";") if x != "spot_preemption_per_h"
        )
    return off


# ---------------------------------------------------------------- provider-specific notes
def add_notes(off: pd.DataFrame, provider: str, data: Path) -> pd.DataFrame:
    def tag(mask, t):
        off.loc[mask, "notes"] = [
            ";".join(x for x in (n, t) if x) for n in off.loc[mask, "notes"]
        ]

    it = off["instance_type"]
    if provider == "gcp":
        fl = pd.read_csv(data / "gcp_flagged_prices.csv")
        keys = set(zip(fl.instance_type, fl.region, fl.accelerator_count))
        m = [(a, b, c) in keys for a, b, c in zip(it, off.region, off.gpus_per_node)]
        off.loc[m, "notes"] = [
            n.replace("no_on_demand_price", "on_demand_suspect_blanked")
            for n in off.loc[m, "notes"]
        ]
        tag(it == "a4-highgpu-8g", "host_price_zero;b200_two_price_levels")
        tag(it.str.startswith("n1-"), "attached_gpu_host_combo")
    if provider == "aws":
        tag(it == "p5e.48xlarge", "capacity_block_style_no_on_demand")
    if provider == "runpod":
        tag(off.gpu == "L40S", "runpod_l40s_price_swap_corrected;gpu_vram_from_model")
        tag((off.gpu == "L40S") & (off.gpus_per_node > 1), "vcpus_not_credible_blanked")
        tag(off.index == off.index, "availability_unknown")
    if provider == "lambda":
        tag(off.index == off.index, "availability_unknown")
    if provider == "azure":
        tag(it == "Standard_ND96isr_H100_v5", "gpu_count_corrected_12_to_8")
        tag(off.index == off.index, "gpu_vram_from_model")
    if provider == "paperspace":
        tag(off.index == off.index, "gpu_vram_from_model")
        tag(
            off.gpu.isin(["A100-80GB", "H100-SXM", "V100-16GB", "V100-32GB"]),
            "gpu_variant_assumed_sxm",
        )
    if provider == "cudo":
        tag(
            off.gpu.isin(["A100-80GB-PCIe", "V100-16GB-PCIe"]),
            "gpu_variant_assumed_pcie",
        )
    if provider == "vast":
        tag(off.index == off.index, "marketplace_offer")
        tag((off.gpu == "RTX4090") & (off.gpu_vram_gib > 40), "vram_differs_from_model")
        tag(off.gpu.str.startswith("V100"), "gpu_variant_assumed_pcie")
    if provider == "do":
        tag(off.index == off.index, "gpu_variant_assumed_sxm")
    return off


# ---------------------------------------------------------------- writing
def fmt(v) -> str:
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "true" if v else "false"
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return format(round(v, 6), ".12g")
    if isinstance(v, (int,)):
        return str(v)
    try:
        if pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    if hasattr(v, "item"):
        return fmt(v.item())
    return str(v)


def write_csv(df: pd.DataFrame, path: Path, header_comments: list[str] = ()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {c}" for c in header_comments]
    lines.append(",".join(df.columns))
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            s = fmt(v)
            if any(ch in s for ch in ',"\n'):
                s = '"' + s.replace('"', '""') + '"'
            cells.append(s)
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def name_attached_gpus(off: pd.DataFrame) -> pd.DataFrame:
    """A host that takes attachable GPUs (GCP n1 + T4/V100/P100/P4) is listed once per GPU
    model and count; name each one `host+GPUxCOUNT` so `provider/region/instance_type`
    identifies one offer, as users and the solver expect."""
    repeated = off.duplicated(["region", "instance_type"], keep=False)
    off = off.copy()
    off.loc[repeated, "instance_type"] = (
        off.loc[repeated, "instance_type"]
        + "+"
        + off.loc[repeated, "gpu"]
        + "x"
        + off.loc[repeated, "gpus_per_node"].astype(str)
    )
    return off


def drop_unverifiable_floor_spot(off: pd.DataFrame) -> pd.DataFrame:
    """In regions where spot prices sit on the 10 % floor, a spot price with no on-demand price to
    compare against cannot be told apart from the floor (AWS p5e in ap-southeast-3 is exactly 10 %
    of p5en's on-demand price): blank it rather than let a fake bargain win every plan."""
    floor_regions = set(
        off.loc[off.notes.str.contains("spot_price_floor", na=False), "region"]
    )
    suspect = (
        off.region.isin(floor_regions)
        & off.on_demand_usd_h.isna()
        & off.spot_usd_h.notna()
    )
    off = off.copy()
    off.loc[suspect, "spot_usd_h"] = float("nan")
    off.loc[suspect, "spot_preemption_per_h"] = float("nan")
    off.loc[suspect, "notes"] = (
        off.loc[suspect, "notes"]
        .fillna("")
        .map(lambda n: ";".join(filter(None, [n, "spot_price_floor_unverifiable"])))
    )
    return off


def build_offers(
    data: Path, aliases: dict[str, str], gpu_names: set[str]
) -> dict[str, pd.DataFrame]:
    fam = families_table(data)
    out = {}
    for p in sorted(OFFER_SOURCES):
        raw = pd.read_csv(data / "offers" / f"{p}.csv")
        off = import_skypilot(raw, p, aliases, resolve_gpu=resolve_gpu(p))
        off = apply_interconnect(off, p, fam)
        if p == "aws":
            off = apply_aws_preemption(off, data)
        off = add_notes(off, p, data)
        assert set(off.gpu) <= gpu_names, set(off.gpu) - gpu_names
        assert set(raw.instance_type) == set(off.instance_type), p
        assert not off.duplicated(
            ["region", "instance_type", "gpu", "gpus_per_node"]
        ).any(), p
        off = name_attached_gpus(off)
        off = drop_unverifiable_floor_spot(off)
        unpriced = off.on_demand_usd_h.isna() & off.spot_usd_h.isna()
        for row in off[unpriced].itertuples():
            print(
                f"  dropped {p}/{row.region}/{row.instance_type}: no on-demand and no spot price"
            )
        off = off[~unpriced].reset_index(drop=True)
        assert not off.duplicated(["region", "instance_type"]).any(), p
        out[p] = off
    return out


# The day the price snapshots are dated.  The upstream catalog commits' dates were not recorded;
# their content dates them to mid-2025 (the AWS Spot Advisor feed is of 2025-06-28), so the
# earliest date the content fits is used: a user is warned about old prices rather than too late.
SNAPSHOT_DATE = "2025-07-01"


def main(argv: list[str]) -> None:
    data = Path(argv[1]) if len(argv) > 1 else (ROOT / ".." / "shared" / "data")
    data = data.resolve()
    needed = [data / "gpus.csv", data / "models.csv", data / "offers"]
    if not all(p.exists() for p in needed):
        print(
            f"error: {data}: expected the reference data folder (gpus.csv, models.csv, offers/*.csv, "
            "billing_facts.csv, ... as described in catalogs/README.md); "
            "usage: python tools/build_catalogs.py DATA_DIR",
            file=sys.stderr,
        )
        sys.exit(2)
    gpus = build_gpus(data)
    write_csv(gpus, OUT / "gpus.csv")
    write_csv(build_models(data), OUT / "models.csv")
    write_csv(build_providers(), OUT / "providers.csv")
    offers = build_offers(data, gpu_aliases(gpus), set(gpus["name"]))
    for p, off in offers.items():
        path, sha = OFFER_SOURCES[p]
        write_csv(
            off,
            OUT / "offers" / f"{p}.csv",
            [
                f"source: skypilot-org/skypilot-catalog {path} @ {sha} (via shared/data/offers/{p}.csv)",
                f"as_of: {SNAPSHOT_DATE}",
                "built_by: tools/build_catalogs.py",
            ],
        )
        print(
            f"{p:12s} {len(off):4d} rows, {off.instance_type.nunique():3d} instance types, "
            f"spot rows {int((off.spot_usd_h > 0).sum())}"
        )
    print(f"gpus {len(gpus)} rows, models written to {OUT}")


if __name__ == "__main__":
    main(sys.argv)
