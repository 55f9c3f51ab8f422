"""GPU clusters and online inference: GPU nodes and their pools, GPU types, InfiniBand, served models and
the gateway (DESIGN section 2, gpu role; section 1, inference).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from components.config.fields import Address, Cidr, DnsLabel, DnsName, Flag, LabelValue, NodeName, RelativePath, Unique, _Model
from components.config.names import ModelKey


MAX_CONTEXT = 10 * 1024 * 1024
"""Longest context a model may be sized for: 10 Mi tokens, the longest context window models offer."""
RequestsPerMinute = Annotated[int, Field(ge=1, le=1_000_000, strict=True)]
"""A gateway rate limit: at most a million requests a minute per team, far above what a pool serves."""


class GpuType(_Model):
    """A GPU model: its memory as the driver reports it, and the product label GPU feature discovery sets."""

    memory_mib: int = Field(ge=1024, le=1_048_576, strict=True, description="Memory per GPU in MiB, as nvidia-smi reports it (at most 1 TiB).")
    product: LabelValue = Field(min_length=1, description="Value of the node label nvidia.com/gpu.product.")


DEFAULT_GPU_TYPES: dict[str, GpuType] = {
    "h100": GpuType(memory_mib=81559, product="NVIDIA-H100-80GB-HBM3"),
    "h200": GpuType(memory_mib=143771, product="NVIDIA-H200"),
}


class GpuNode(_Model):
    """One GPU node and the pool it serves."""

    gpu_type: DnsLabel = Field(description="Key of `gpu_types` (h100, h200, ...).")
    gpus: int = Field(ge=1, le=16, strict=True, description="GPUs in the node.")
    pool: Literal["inference", "training"] = Field(description="inference (serving, high priority) or training (Kueue, preemptible).")


class InfinibandConfig(_Model):
    """How InfiniBand is used: NCCL on training nodes; weight loading too on inference nodes."""

    rdma_hca_max: int = Field(63, ge=1, le=1000, strict=True, description="Pods sharing one HCA through the RDMA shared device plugin. Defaults to 63.")
    inference_weights_over_ib: Flag = Field(
        True, description="Give inference pods an IPoIB interface to load weights over InfiniBand. Defaults to true."
    )
    ipoib_range: Cidr | None = Field(None, description="Addresses of the IPoIB network for inference pods; required when weights load over IB.")
    ipoib_master: str = Field("ib0", min_length=1, description="Host IPoIB interface the inference pods' IPoIB network sits on. Defaults to ib0.")
    storage_qos_service_level: int | None = Field(
        None, ge=0, le=15, strict=True,
        description="InfiniBand service level for storage traffic of training nodes. Unset: training storage traffic stays on the Ethernet bond.",
    )


class GpuClusterConfig(_Model):
    """What the GPU and Network Operators manage on one gpu or gpu-train cluster."""

    mig_strategy: Literal["none", "single", "mixed"] = Field("none", description="GPU Operator MIG strategy. Defaults to none.")
    nodes: dict[NodeName, GpuNode] = Field(min_length=1, description="GPU nodes by Kubernetes node name.")
    system_nodes: Annotated[list[NodeName], Unique] = Field(
        min_length=1,
        description="Nodes without GPUs (and without taints) that run the cluster's system pods: Kueue, Envoy Gateway and "
        "its proxies, Hubble Relay, the ClusterMesh API server, the operators' controllers. GPU nodes carry their pool's "
        "taint, which those pods do not tolerate; control-plane nodes usually carry one too.",
    )
    infiniband: InfinibandConfig = Field(default_factory=InfinibandConfig, description="InfiniBand roles.")
    nvme_provisioner: str = Field(
        "rancher.io/local-path", min_length=1,
        description="Provisioner of the local NVMe StorageClass (cache and scratch only). Defaults to rancher.io/local-path.",
    )


class InferenceModelConfig(_Model):
    """A served model: its profile for GPU sizing and where its weights are."""

    source: RelativePath = Field(min_length=1, description="Path of the weights inside the models bucket, for example meta/llama-3.3-70b-instruct/.")
    served_name: str | None = Field(
        None, min_length=1, description="Model name in the OpenAI API, used by this model only. Defaults to the key."
    )
    params_billion: float = Field(gt=0, le=10000, strict=True, description="Parameters, in billions.")
    layers: int = Field(ge=1, le=1000, strict=True, description="Transformer layers.")
    kv_heads: int = Field(ge=1, le=1024, strict=True, description="Key-value heads (GQA groups).")
    head_dim: int = Field(ge=1, le=1024, strict=True, description="Head dimension.")
    dtype: Literal["bf16", "fp16", "fp8"] = Field("bf16", description="Weight dtype. Defaults to bf16.")
    max_context: int = Field(
        ge=1, le=MAX_CONTEXT, strict=True, description="Longest sequence served (vLLM --max-model-len), at most 10 Mi tokens."
    )
    mean_context: int | None = Field(
        None, ge=1, le=MAX_CONTEXT, strict=True,
        description="Typical sequence length, used to size replicas for the concurrency target. Defaults to max_context (conservative).",
    )
    concurrent_sequences: int = Field(ge=1, le=1_000_000, strict=True, description="Sequences served at once across replicas.")
    min_replicas: int = Field(2, ge=1, le=64, strict=True, description="Replicas kept whatever the sizing says, for availability. Defaults to 2.")


class GatewayConfig(_Model):
    """The one inference gateway: a fixed internal VIP and DNS name."""

    pool: DnsLabel = Field("internal", description="Internal pool of the inference cluster. Defaults to internal.")
    vip: Address = Field(description="Fixed address of the gateway in `pool`: a host address of it, used by no other endpoint.")
    hostname: DnsName | None = Field(None, description="DNS name of the serving URL. Defaults to llm.<domain>.")
    tls_secret: DnsLabel = Field(
        "llm-gateway-tls",
        description="kubernetes.io/tls Secret with the gateway's certificate, issued by the site's PKI into "
        "envoy-gateway-system. Defaults to llm-gateway-tls.",
    )


class InferenceConfig(_Model):
    """Online inference: vLLM per model behind one authenticated, rate-limited gateway."""

    cluster: DnsLabel = Field(description="The gpu cluster that serves (role gpu).")
    gpu_memory_utilization: float = Field(0.9, ge=0.5, le=0.98, strict=True, description="vLLM's share of GPU memory. Defaults to 0.9.")
    reserve_gib: float = Field(2.0, ge=0, le=32, strict=True, description="Memory per GPU kept for activations and CUDA graphs. Defaults to 2.")
    gateway: GatewayConfig
    models: dict[ModelKey, InferenceModelConfig] = Field(min_length=1, description="Served models by name.")
    requests_per_minute: RequestsPerMinute = Field(
        600, description="Requests per minute each team may send to each model, counted once across all gateway replicas. Defaults to 600."
    )
    team_requests_per_minute: dict[DnsLabel, RequestsPerMinute] = Field(
        default_factory=dict, description="Requests per minute to each model for the teams whose rate differs from the default (at most 15 teams)."
    )
