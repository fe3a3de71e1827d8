"""DeepSpeed's own model-state memory estimators, reproduced (pure functions, bytes).

Physics layer.  DeepSpeed ships estimate_zero2/zero3_model_states_mem_needs; these reproduce them so
the planner's ZeRO memory (memory_training.training_memory) can be held against the framework's own figures
(tests/test_memory.py).  Not used for planning.
"""

from __future__ import annotations


def deepspeed_zero2_gpu_bytes(
    P: int,
    gpus_per_node: int = 1,
    nodes: int = 1,
    cpu_offload: bool = True,
    legacy: bool = False,
) -> int:
    """GPU bytes of estimate_zero2_model_states_mem_needs (stage_1_and_2.py).

    offload: 2P.  No offload: 2P + int(18P/total_gpus) (code since PR #5099),
    or 4P + int(16P/total_gpus) with legacy=True (memory.rst docs).
    """
    total = gpus_per_node * nodes
    if cpu_offload:
        return 2 * P
    if legacy:
        return 4 * P + int(16 * P / total)
    return 2 * P + int(18 * P / total)


def deepspeed_zero2_cpu_bytes(
    P: int,
    gpus_per_node: int = 1,
    nodes: int = 1,
    cpu_offload: bool = True,
    additional_buffer_factor: float = 1.5,
) -> float:
    """CPU bytes of estimate_zero2_model_states_mem_needs."""
    total = gpus_per_node * nodes
    if cpu_offload:
        return P * max(4 * total, 16) * additional_buffer_factor
    return P * 4 * gpus_per_node * additional_buffer_factor


def deepspeed_zero3_gpu_bytes(
    P: int,
    largest_layer_params: int,
    gpus_per_node: int = 1,
    nodes: int = 1,
    offload_optimizer: bool = True,
    offload_param: bool = True,
) -> int:
    """GPU bytes of estimate_zero3_model_states_mem_needs (stage3.py).

    LLM = 4*largest_layer_params; both offloaded: LLM; optimizer only:
    LLM + int(2P/total_gpus); none: LLM + int(18P/total_gpus).
    """
    total = gpus_per_node * nodes
    llm = 4 * largest_layer_params
    if offload_optimizer and offload_param:
        return llm
    if offload_optimizer:
        return llm + int(2 * P / total)
    if offload_param:
        raise ValueError(
            "offload_param without offload_optimizer is not estimated by DeepSpeed"
        )
    return llm + int(18 * P / total)


def deepspeed_zero3_cpu_bytes(
    P: int,
    largest_layer_params: int,
    gpus_per_node: int = 1,
    nodes: int = 1,
    offload_optimizer: bool = True,
    offload_param: bool = True,
    zero_init: bool = True,
    additional_buffer_factor: float = 1.5,
) -> float:
    """CPU bytes of estimate_zero3_model_states_mem_needs."""
    n, f, buf = gpus_per_node, 1.0 / nodes, additional_buffer_factor
    if offload_optimizer and offload_param:
        return P * 18 * f * buf if zero_init else P * max(4 * n, 18 * f) * buf
    if offload_optimizer:
        return P * 16 * f * buf if zero_init else P * max(4 * n, 16 * f) * buf
    if offload_param:
        raise ValueError(
            "offload_param without offload_optimizer is not estimated by DeepSpeed"
        )
    return largest_layer_params * 4 * n * buf if zero_init else P * 4 * n * buf
