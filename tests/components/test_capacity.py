"""GPU sizing against worked examples: KV cache per token, tensor parallel choice, replicas, packing per node, refusals."""

from __future__ import annotations

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from components.capacity import (
    TP_SIZES, CapacityError, GpuType, ModelCapacity, ModelProfile, check_pool, size_model, unplaced_replicas,
)

H200 = GpuType("H200", 143771)
H100 = GpuType("H100", 81559)
LLAMA_70B = ModelProfile("llama-70b", 70, 80, 8, 128, "bf16", 32768, concurrent_sequences=64)


def test_a_70b_bf16_model_needs_320_kib_of_kv_cache_per_token():
    assert LLAMA_70B.kv_bytes_per_token(1) == 320 * 1024


def test_kv_heads_are_split_across_the_tensor_parallel_group():
    assert [LLAMA_70B.kv_bytes_per_token(tp) for tp in (1, 2, 4, 8)] == [327680, 163840, 81920, 40960]


def test_kv_heads_are_replicated_when_the_group_is_larger():
    model = ModelProfile("gqa-2", 7, 32, 2, 128, "bf16", 4096, 1)
    assert model.kv_bytes_per_token(8) == 2 * 32 * 1 * 128 * 2


def test_fp8_kv_cache_halves_it():
    model = ModelProfile("llama-70b-fp8", 70, 80, 8, 128, "bf16", 32768, 1, kv_cache_dtype="fp8")
    assert model.kv_bytes_per_token(1) == 160 * 1024


def test_a_70b_model_needs_two_h200s():
    # 140 GB of weights: one H200 (140.4 GiB x 0.9 - 2 GiB = 124.4 GiB) cannot hold them, two can.
    size = size_model(LLAMA_70B, H200, 8, 0.9)
    assert (size.tensor_parallel, round(size.weights_per_gpu_gib, 1), round(size.kv_budget_per_gpu_gib, 1)) == (2, 65.2, 59.2)
    assert (size.max_context_sequences, size.replicas) == (11, 6)


def test_a_70b_model_needs_four_h100s():
    size = size_model(LLAMA_70B, H100, 8, 0.9)
    assert (size.tensor_parallel, size.max_context_sequences, size.replicas) == (4, 14, 5)


def test_the_mean_context_sizes_replicas_and_the_max_context_only_the_fit():
    model = ModelProfile("llama-70b", 70, 80, 8, 128, "bf16", 32768, 256, mean_context=4096)
    size = size_model(model, H200, 8, 0.9)
    assert (size.tensor_parallel, size.max_context_sequences, size.sequences_per_replica, size.replicas) == (2, 11, 94, 3)


def test_min_replicas_keep_a_small_model_highly_available():
    small = ModelProfile("qwen3-8b", 8.2, 36, 8, 128, "bf16", 32768, 4)
    assert size_model(small, H200, 8, 0.9, min_replicas=2).replicas == 2


def test_fails_when_a_model_cannot_fit_on_a_node():
    model = ModelProfile("llama-405b", 405, 126, 8, 128, "bf16", 131072, 16)
    with pytest.raises(CapacityError) as info:
        size_model(model, H100, 8, 0.9)
    assert str(info.value) == (
        "model llama-405b does not fit: it needs 102.2 GiB per GPU (weights and one 131072-token sequence at tensor "
        "parallel 8, the largest group within a node of 8 GPUs) but a H100 offers 69.7 GiB (gpu_memory_utilization 0.9, "
        "2 GiB reserved); use more GPUs per node, a smaller dtype or a shorter max_context"
    )


def test_a_tensor_parallel_group_stays_within_one_node():
    # The 70B model needs four H100s (TP4); on nodes of 3 GPUs TP stops at 2, which cannot hold it.
    with pytest.raises(CapacityError) as info:
        size_model(LLAMA_70B, H100, 3, 0.9)
    assert "at tensor parallel 2, the largest group within a node of 3 GPUs)" in str(info.value)


def test_fails_when_the_models_need_more_gpus_than_the_pool_has():
    sizes = [
        ModelCapacity("a", 2, 65.0, 1, 59.0, 11, 11, 6),
        ModelCapacity("b", 1, 15.0, 1, 109.0, 24, 24, 3),
    ]
    with pytest.raises(CapacityError) as info:
        check_pool(sizes, [8], "gpu/inference")
    assert str(info.value) == (
        "the models need 15 GPUs (a 6 x TP2 = 12, b 3 x TP1 = 3) but inference pool gpu/inference has 8 (1 node of 8 GPUs); "
        "add inference nodes or serve fewer replicas"
    )


def replicas(model: str, tp: int, count: int) -> ModelCapacity:
    """A sizing that only says how many replicas of which tensor-parallel size."""
    return ModelCapacity(model, tp, 1.0, 1, 1.0, 1, 1, count)


def test_a_node_holds_as_many_replicas_as_whole_groups_fit():
    # 6 GPUs: one TP4 group and the 2 GPUs left over take a TP2 group.
    assert unplaced_replicas([replicas("a", 4, 2), replicas("b", 2, 2)], [6, 6]) == {}


def test_models_share_nodes_largest_groups_first():
    # Placed in the order given, 4 x TP1 would split the TP4 group's node.
    assert unplaced_replicas([replicas("small", 1, 4), replicas("big", 4, 1)], [4, 4]) == {}


def test_fails_when_a_tensor_parallel_group_would_span_two_nodes():
    with pytest.raises(CapacityError) as info:
        check_pool([replicas("llama-70b", 4, 3)], [6, 6], "gpu/inference")
    assert str(info.value) == (
        "the models need 12 GPUs (llama-70b 3 x TP4 = 12) and inference pool gpu/inference has 12 (2 nodes of 6 GPUs), "
        "but a replica never spans nodes: a node of 6 GPUs holds 1 replica at TP4, so 1 x TP4 of llama-70b is left "
        "without a node; add inference nodes or serve fewer replicas"
    )


def test_fails_naming_the_replicas_left_over_by_the_larger_groups():
    with pytest.raises(CapacityError) as info:
        check_pool([replicas("a", 4, 2), replicas("b", 2, 1)], [5, 5], "gpu/inference")
    assert str(info.value) == (
        "the models need 10 GPUs (a 2 x TP4 = 8, b 1 x TP2 = 2) and inference pool gpu/inference has 10 (2 nodes of 5 GPUs), "
        "but a replica never spans nodes: a node of 5 GPUs holds 1 replica at TP4 or 2 replicas at TP2, so 1 x TP2 of b is "
        "left without a node; add inference nodes or serve fewer replicas"
    )


def test_a_group_larger_than_every_node_is_never_placed():
    assert unplaced_replicas([replicas("a", 8, 1)], [6, 6]) == {"a": (1, 8)}


def _packs(groups: list[int], free: list[int]) -> bool:
    """Whether the groups can be placed on the nodes at all: every assignment, tried."""
    if not groups:
        return True
    first, rest = groups[0], groups[1:]
    for i, gpus in enumerate(free):
        if gpus >= first and _packs(rest, free[:i] + [gpus - first] + free[i + 1:]):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 16), st.integers(1, 3),
    st.lists(st.tuples(st.sampled_from(TP_SIZES), st.integers(1, 3)), min_size=1, max_size=3),
)
def test_first_fit_decreasing_packs_whenever_any_placement_does(gpus_per_node, nodes, models):
    sizes = [replicas(f"m{i}", tp, count) for i, (tp, count) in enumerate(models)]
    groups = [c.tensor_parallel for c in sizes for _ in range(c.replicas)]
    assert (unplaced_replicas(sizes, [gpus_per_node] * nodes) == {}) == _packs(groups, [gpus_per_node] * nodes)
