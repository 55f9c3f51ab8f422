"""GPU sizing against worked examples: KV cache per token, tensor parallel choice, replicas, refusals."""

from __future__ import annotations

import pytest

from components.capacity import CapacityError, GpuType, ModelCapacity, ModelProfile, check_pool, size_model

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
        "parallel 8) but a H100 offers 69.7 GiB (gpu_memory_utilization 0.9, 2 GiB reserved); use more GPUs per node, "
        "a smaller dtype or a shorter max_context"
    )


def test_fails_when_the_models_need_more_gpus_than_the_pool_has():
    sizes = [
        ModelCapacity("a", 2, 65.0, 1, 59.0, 11, 11, 6),
        ModelCapacity("b", 1, 15.0, 1, 109.0, 24, 24, 3),
    ]
    with pytest.raises(CapacityError) as info:
        check_pool(sizes, 8, "gpu/inference")
    assert str(info.value) == "the models need 15 GPUs (a 6 x TP2 = 12, b 3 x TP1 = 3) but inference pool gpu/inference has 8"
