"""GPU sizing of served models (DESIGN section 2, InferencePool): weights, KV cache, tensor parallelism, replicas.

Pure arithmetic on a model profile and a GPU type, so that config validation, the InferencePool and
tests share one answer. The budget per GPU is what vLLM allows itself (`gpu_memory_utilization` of
the GPU's memory) minus a reserve for activations and CUDA graphs; weights are split evenly across
the tensor-parallel group, and so are KV heads (at least one per GPU, as vLLM replicates them when
the group is larger than the number of KV heads).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

GIB = 1024**3
MIB = 1024**2
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
TP_SIZES = (1, 2, 4, 8)
"""Tensor-parallel sizes vLLM serves within one node."""


@dataclass(frozen=True)
class ModelProfile:
    name: str
    params_billion: float
    layers: int
    kv_heads: int
    head_dim: int
    dtype: str
    max_context: int
    concurrent_sequences: int
    mean_context: int | None = None
    """Typical sequence length for the concurrency target; defaults to max_context."""
    kv_cache_dtype: str | None = None
    """KV cache dtype; defaults to the weights' dtype."""

    @property
    def weight_bytes(self) -> float:
        return self.params_billion * 1e9 * DTYPE_BYTES[self.dtype]

    def kv_bytes_per_token(self, tp: int) -> int:
        """KV cache per token on one GPU of a tensor-parallel group of `tp`: 2 x layers x max(1, kv_heads // tp) x head_dim x bytes."""
        per_value = DTYPE_BYTES[self.kv_cache_dtype or self.dtype]
        return int(2 * self.layers * max(1, self.kv_heads // tp) * self.head_dim * per_value)


@dataclass(frozen=True)
class GpuType:
    name: str
    memory_mib: int

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB


@dataclass(frozen=True)
class ModelCapacity:
    """How one model is served: the answer `size_model` gives."""

    model: str
    tensor_parallel: int
    weights_per_gpu_gib: float
    kv_bytes_per_token: int
    kv_budget_per_gpu_gib: float
    max_context_sequences: int
    """Sequences of max_context length that fit in one replica's KV cache."""
    sequences_per_replica: int
    """Sequences of mean_context length that fit in one replica's KV cache."""
    replicas: int

    @property
    def gpus(self) -> int:
        return self.replicas * self.tensor_parallel


class CapacityError(ValueError):
    """A model that cannot be served as asked; the message carries the numbers."""


def _budget(gpu: GpuType, utilization: float, reserve_gib: float) -> float:
    return gpu.memory_bytes * utilization - reserve_gib * GIB


def size_model(
    profile: ModelProfile, gpu: GpuType, gpus_per_node: int, utilization: float, reserve_gib: float = 2.0, min_replicas: int = 1
) -> ModelCapacity:
    """The smallest tensor-parallel size at which one full-context sequence fits, and the replicas for the target."""
    budget = _budget(gpu, utilization, reserve_gib)
    for tp in (t for t in TP_SIZES if t <= gpus_per_node):
        weights = profile.weight_bytes / tp
        kv_per_token = profile.kv_bytes_per_token(tp)
        kv_budget = budget - weights
        full = int(kv_budget // (kv_per_token * profile.max_context)) if kv_budget > 0 else 0
        if full >= 1:
            typical = int(kv_budget // (kv_per_token * (profile.mean_context or profile.max_context)))
            return ModelCapacity(
                model=profile.name,
                tensor_parallel=tp,
                weights_per_gpu_gib=weights / GIB,
                kv_bytes_per_token=kv_per_token,
                kv_budget_per_gpu_gib=kv_budget / GIB,
                max_context_sequences=full,
                sequences_per_replica=typical,
                replicas=max(min_replicas, math.ceil(profile.concurrent_sequences / typical)),
            )
    tp = max(t for t in TP_SIZES if t <= gpus_per_node)
    needed = profile.weight_bytes / tp + profile.kv_bytes_per_token(tp) * profile.max_context
    raise CapacityError(
        f"model {profile.name} does not fit: it needs {needed / GIB:.1f} GiB per GPU (weights and one "
        f"{profile.max_context}-token sequence at tensor parallel {tp}, the largest group within a node of {gpus_per_node} "
        f"GPUs) but a {gpu.name} offers {budget / GIB:.1f} GiB "
        f"(gpu_memory_utilization {utilization}, {reserve_gib:g} GiB reserved); use more GPUs per node, a smaller "
        f"dtype or a shorter max_context"
    )


def check_pool(capacities: list[ModelCapacity], node_gpus: Sequence[int], pool: str) -> None:
    """Refuse models whose replicas do not pack onto the inference pool's nodes.

    A replica's tensor-parallel group lives on one node (vLLM does not span nodes here), so a node of G GPUs
    holds G // TP replicas of one model and what is left over serves smaller groups of other models. The
    packing is first-fit decreasing, which is optimal for these sizes (each of 1, 2, 4, 8 divides the next)
    on nodes of one shape.
    """
    needed = sum(c.gpus for c in capacities)
    pool_gpus = sum(node_gpus)
    detail = ", ".join(f"{c.model} {c.replicas} x TP{c.tensor_parallel} = {c.gpus}" for c in capacities)
    fix = "add inference nodes or serve fewer replicas"
    if needed > pool_gpus:
        raise CapacityError(
            f"the models need {needed} GPUs ({detail}) but inference pool {pool} has {pool_gpus} ({_nodes(node_gpus)}); {fix}"
        )
    left = unplaced_replicas(capacities, node_gpus)
    if left:
        sizes = sorted({c.tensor_parallel for c in capacities}, reverse=True)
        per_node = "; ".join(
            f"a node of {g} GPUs holds " + " or ".join(f"{_count(g // tp, 'replica')} at TP{tp}" for tp in sizes)
            for g in sorted(set(node_gpus), reverse=True)
        )
        rest = ", ".join(f"{n} x TP{tp} of {model}" for model, (n, tp) in left.items())
        raise CapacityError(
            f"the models need {needed} GPUs ({detail}) and inference pool {pool} has {pool_gpus} ({_nodes(node_gpus)}), "
            f"but a replica never spans nodes: {per_node}, so {rest} {'is' if sum(n for n, _ in left.values()) == 1 else 'are'} "
            f"left without a node; {fix}"
        )


def unplaced_replicas(capacities: list[ModelCapacity], node_gpus: Sequence[int]) -> dict[str, tuple[int, int]]:
    """Model -> (replicas, TP) that find no node when replicas are placed largest group first, each on the first
    node with room for its whole tensor-parallel group."""
    free = list(node_gpus)
    left: dict[str, tuple[int, int]] = {}
    for c in sorted(capacities, key=lambda c: (-c.tensor_parallel, c.model)):
        for _ in range(c.replicas):
            node = next((i for i, gpus in enumerate(free) if gpus >= c.tensor_parallel), None)
            if node is None:
                left[c.model] = (left.get(c.model, (0, 0))[0] + 1, c.tensor_parallel)
            else:
                free[node] -= c.tensor_parallel
    return left


def _count(n: int, noun: str) -> str:
    return f"no {noun}" if n == 0 else f"{n} {noun}{'' if n == 1 else 's'}"


def _nodes(node_gpus: Sequence[int]) -> str:
    """`2 nodes of 6 GPUs`, or `1 node of 8 GPUs and 2 nodes of 4 GPUs`."""
    shapes = sorted({g: node_gpus.count(g) for g in node_gpus}.items(), reverse=True)
    return " and ".join(f"{_count(n, 'node')} of {g} GPUs" for g, n in shapes)
