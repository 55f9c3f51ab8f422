"""GPU clusters and online inference: GPU nodes and their pools, GPU types, InfiniBand, served models and
the gateway (DESIGN section 2, gpu role; section 1, inference).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from components.config.fields import (
    Address,
    Cidr,
    DnsLabel,
    DnsName,
    Flag,
    LabelValue,
    NodeName,
    RelativePath,
    Unique,
    _Model,
    matching,
)
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
    pool: Literal["inference", "training", "notebooks"] = Field(
        description="inference (serving, high priority), training (Kueue, preemptible) or notebooks (its GPUs shared by GPU "
        "notebooks as `gpu.<cluster>.sharing` says, never handed out whole).",
    )


ServiceLevel = Annotated[int, Field(ge=0, le=15, strict=True)]
"""An InfiniBand service level: 0-15 (the subnet manager maps each to a virtual lane)."""
DEFAULT_PARTITION = 0x7FFF
"""The default partition (0xffff as a full member): every port of the fabric is a member of it."""


def _partition_key(value: Any) -> str:
    """A partition key as written in the stack file (0x0a01, or the number), as four hex digits without the membership
    bit: an identifier, not a quantity."""
    example = "such as 0x0a01"
    if isinstance(value, str):
        if not re.fullmatch(r"0[xX][0-9a-fA-F]{1,4}", value):
            raise ValueError(f"must be a partition key in hex, {example}")
        value = int(value, 16)
    if type(value) is not int:  # a YAML true or 1.5 is no partition
        raise ValueError(f"must be a partition key in hex, {example}")
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"{value:#x} is not a 16-bit partition key; give the storage partition's key, 0x0001-0x7ffe, {example}")
    if value & 0x7FFF == DEFAULT_PARTITION:
        raise ValueError(f"{value:#06x} is the default partition, which every port of the fabric is a member of; give the "
                         "storage partition's key, 0x0001-0x7ffe")
    if value & 0x7FFF == 0:
        raise ValueError(f"{value:#06x} is not a partition key; give the storage partition's key, 0x0001-0x7ffe")
    if value & 0x8000:
        raise ValueError(f"{value:#06x} has the full-membership bit 0x8000 set; give the partition's key without it, "
                         f"{value & 0x7FFF:#06x} (the hosts join as full members)")
    return f"{value:#06x}"


_WRITTEN_PARTITION_KEY = Annotated[int, Field(ge=1, le=0x7FFE)] | Annotated[str, Field(pattern=r"^0[xX][0-9a-fA-F]{1,4}$")]
"""How a partition key may be written (for editors' schema checks): a number, or hex text such as 0x0a01."""
PartitionKey = Annotated[str, BeforeValidator(_partition_key, json_schema_input_type=_WRITTEN_PARTITION_KEY)]
"""An InfiniBand partition key (P_Key) other than the default partition, without its membership bit: 0x0001-0x7ffe,
kept as written in hex (0x0a01)."""


_ipoib_port = matching(
    re.compile(r"^[A-Za-z0-9_-]{1,10}$"),
    "must be the host's IPoIB port interface, such as ib0: at most 10 letters, digits, '-' or '_', and no '.', since the "
    "program adds the partition's '.<P_Key>' and an interface name has at most 15 characters",
)
IpoibPort = Annotated[str, AfterValidator(_ipoib_port)]
"""The name of a host's IPoIB port interface (ib0), whose partition child interfaces are `<name>.<P_Key>`."""

_hca_port = matching(
    re.compile(r"^[a-z][a-z0-9_]{0,31}(:[1-9][0-9]?)?$"),
    "must be an RDMA device as `ibv_devices` lists it, optionally with a port: mlx5_0 or mlx5_0:1",
)
HcaPort = Annotated[str, AfterValidator(_hca_port)]
"""An InfiniBand HCA (mlx5_0), optionally with its port (mlx5_0:1), as NCCL_IB_HCA names it."""


class InfinibandConfig(_Model):
    """How InfiniBand is used: NCCL on training nodes; weight loading too on inference nodes, when turned on."""

    rdma_hca_max: int = Field(63, ge=1, le=1000, strict=True, description="Pods sharing one HCA through the RDMA shared device plugin. Defaults to 63.")
    nccl_service_level: ServiceLevel = Field(
        0,
        description="InfiniBand service level of NCCL traffic: NCCL_IB_SL in the ConfigMap `nccl` of every team namespace "
        "on the cluster, which training jobs load with envFrom. Defaults to 0, NCCL's own default.",
    )
    nccl_traffic_class: int = Field(
        0, ge=0, le=255, strict=True,
        description="InfiniBand traffic class of NCCL traffic (the GRH's 8-bit Traffic Class field): NCCL_IB_TC in the "
        "ConfigMap `nccl` of every team namespace on the cluster. It counts where packets carry a global route header "
        "(routed InfiniBand, RoCE, where it is the DSCP and ECN byte); within one subnet the service level selects the "
        "virtual lane. Defaults to 0, NCCL's own default.",
    )
    nccl_hcas: Annotated[list[HcaPort], Unique] = Field(
        default_factory=list, max_length=32,
        description="The HCAs (optionally `:port`) NCCL may use on the training nodes, for example mlx5_0 and mlx5_1: "
        "NCCL_IB_HCA in the ConfigMap `nccl`, as exact names (`=mlx5_0,mlx5_1`, so mlx5_1 does not also select mlx5_10). "
        "Defaults to none: NCCL uses every active InfiniBand HCA it finds.",
    )
    inference_weights_over_ib: Flag = Field(
        False,
        description="Inference pods load model weights over InfiniBand: an IPoIB interface in the storage partition, and the "
        "S3 host name resolved to the object store's IPoIB address. The inference cluster only, and only once an RDMA and "
        "contention proof of concept has passed. Needs ipoib_range, ipoib_partition_key, s3_ipoib_address and "
        "storage_qos_service_level. Defaults to false: weights load from the Ethernet S3 endpoint over TCP.",
    )
    ipoib_range: Cidr | None = Field(
        None, description="Addresses of the IPoIB network of inference pods. Required while inference_weights_over_ib, unused otherwise.",
    )
    ipoib_master: IpoibPort = Field(
        "ib0",
        description="Host IPoIB interface whose child interface of the storage partition (`<ipoib_master>.<P_Key>`, "
        "for example ib0.8a01) the IPoIB network sits on. Defaults to ib0.",
    )
    ipoib_partition_key: PartitionKey | None = Field(
        None,
        description="InfiniBand partition of the IPoIB network, 0x0001-0x7ffe (not the default partition): IPoIB is "
        "invisible to Cilium, so the partition, which holds only the inference nodes and the object store, keeps other "
        "ports off it. The hosts carry its full-member child interface (0x8000 added: ib0.8a01 for 0x0a01). Required while "
        "inference_weights_over_ib, unused otherwise.",
    )
    s3_ipoib_address: Address | None = Field(
        None,
        description="Address at which the object store answers S3 on the IPoIB network, inside ipoib_range (never handed "
        "to a pod): the weight sync resolves the S3 host name to it. Required while inference_weights_over_ib, unused otherwise.",
    )
    storage_qos_service_level: ServiceLevel | None = Field(
        None,
        description="InfiniBand service level of storage traffic: the subnet manager gives it to the storage partition "
        "(stack output `infiniband`). Differs from nccl_service_level, so storage never shares NCCL's virtual lane. "
        "Required while inference_weights_over_ib, unused otherwise.",
    )

    storage_bandwidth_percent: int | None = Field(
        None, ge=1, le=99, strict=True,
        description="Share of an InfiniBand port's bandwidth that storage traffic (storage_qos_service_level) gets while "
        "NCCL's competes for the port: the subnet manager's VL arbitration weights, which the stack output `infiniband` "
        "states with an OpenSM QoS snippet for the fabric team (the program cannot apply it). A share under contention, "
        "not a hard cap: an idle port gives storage all of it. Only while inference_weights_over_ib. Defaults to none: "
        "the subnet manager's own arbitration.",
    )

    @property
    def partition_interface(self) -> str | None:
        """The hosts' IPoIB child interface of the storage partition (full member), or None without a partition."""
        key = self.ipoib_partition_key
        return None if key is None else f"{self.ipoib_master}.{int(key, 16) | 0x8000:04x}"


class SparkRapidsConfig(_Model):
    """Spark with the RAPIDS Accelerator on this GPU cluster (method B: Airflow submits SparkApplications to the team
    namespaces here; Kueue admits each whole application against the team's training quota)."""

    executor_gpus: int = Field(1, ge=1, le=8, strict=True, description="GPUs per executor. Defaults to 1.")
    executor_cores: int = Field(8, ge=1, le=128, strict=True, description="CPU cores per executor (tasks per executor). Defaults to 8.")
    executor_memory_gib: int = Field(64, ge=4, le=2048, strict=True, description="Heap per executor. Defaults to 64.")
    concurrent_gpu_tasks: int = Field(
        2, ge=1, le=16, strict=True,
        description="Tasks that share a GPU at once (`spark.rapids.sql.concurrentGpuTasks`). Defaults to 2.",
    )
    pinned_pool_gib: int = Field(
        8, ge=0, le=256, strict=True,
        description="Pinned host memory per executor for GPU transfers (`spark.rapids.memory.pinnedPool.size`). Defaults to 8.",
    )


MIG_PROFILES: dict[str, dict[str, int]] = {
    "NVIDIA-H100-80GB-HBM3": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "NVIDIA-H200": {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
}
"""MIG profiles of each GPU product (nvidia.com/gpu.product) and how many instances of it one GPU holds, from NVIDIA's
MIG user guide, "Supported MIG Profiles"; the media-extension (+me) profiles are left out (one per GPU)."""
MigProfile = Annotated[str, Field(pattern=r"^[1-7]g\.[0-9]+gb$")]
"""A MIG profile name, `<compute slices>g.<memory>gb` (1g.18gb)."""


class GpuSharingConfig(_Model):
    """How the GPUs of a cluster's notebooks-pool nodes are shared (the GPU Operator's device plugin or MIG manager)."""

    mode: Literal["time-slicing", "mig"] = Field(
        "time-slicing",
        description="time-slicing: the device plugin advertises `replicas` nvidia.com/gpu.shared per GPU, which take turns on "
        "it (no memory isolation); mig: each GPU is split into `mig_profile` instances, nvidia.com/mig-<profile> (isolated "
        "memory and compute; needs mig_strategy mixed). Defaults to time-slicing.",
    )
    replicas: int = Field(
        4, ge=2, le=16, strict=True,
        description="time-slicing: notebooks sharing one GPU (nvidia.com/gpu.shared per GPU). Defaults to 4.",
    )
    mig_profile: MigProfile | None = Field(
        None,
        description="mig: the MIG profile every GPU of the notebooks pool is split into, one its GPU type offers (1g.18gb on "
        "H200, 1g.10gb on H100). Required with mode mig, unused otherwise.",
    )

    def resource(self) -> str:
        """The extended resource one notebook requests: a time-slice or a MIG instance, never nvidia.com/gpu."""
        return "nvidia.com/gpu.shared" if self.mode == "time-slicing" else f"nvidia.com/mig-{self.mig_profile}"

    def per_gpu(self, product: str) -> int:
        """Notebooks one GPU of the given product holds."""
        if self.mode == "time-slicing":
            return self.replicas
        return MIG_PROFILES.get(product, {}).get(self.mig_profile or "", 0)


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
    spark_rapids: SparkRapidsConfig | None = Field(
        None,
        description="Run Spark RAPIDS here: the Spark operator, SparkApplications in the team namespaces on training nodes "
        "(roadmap phase 5, `spark-rapids`). Defaults to none: no Spark on this cluster.",
    )
    sharing: GpuSharingConfig = Field(
        default_factory=GpuSharingConfig,
        description="How the GPUs of its notebooks-pool nodes are shared by GPU notebooks (compute.jupyterhub.gpu_notebooks). "
        "Defaults to time-slicing, 4 notebooks per GPU. Unused without notebooks-pool nodes.",
    )


class CanaryConfig(_Model):
    """A model's next revision, served beside the current one to a share of the requests."""

    revision: LabelValue = Field(min_length=1, description="The revision under test: its weights are `<source><revision>/`.")
    weight_percent: int = Field(
        10, ge=1, le=50, strict=True,
        description="Share of the model's requests, in percent, that the gateway sends to the canary. Defaults to 10.",
    )
    replicas: int = Field(1, ge=1, le=64, strict=True, description="Replicas of the canary, sized like the model's. Defaults to 1.")


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
    revision: LabelValue | None = Field(
        None, min_length=1,
        description="Version of the weights: read from `<source><revision>/` in the models bucket, and part of the NVMe "
        "cache path and of the pods' labels, so a new revision never serves from another's cache. Defaults to none: the "
        "weights are read from `source` itself.",
    )
    canary: CanaryConfig | None = Field(
        None,
        description="A new revision served to a share of the traffic before it replaces `revision` (docs/mlops.md, "
        "\"Canary then switch\"). Defaults to none: every request goes to `revision`.",
    )


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
    delivery: Literal["pulumi", "argocd"] = Field(
        "pulumi",
        description="Who applies each model's serving objects (vLLM Deployment, Service, PodDisruptionBudget, HTTPRoute): "
        "pulumi, or argocd from the serving repository that `fabctl serving render` writes (needs compute.argocd). "
        "Pulumi keeps the platform either way. Defaults to pulumi.",
    )
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
    routing: Literal["gateway", "inference-extension"] = Field(
        "gateway",
        description="How the gateway picks a model's replica: gateway (Envoy Gateway balances over the model's Service) or "
        "inference-extension (per model an InferencePool and its endpoint picker, which picks the replica by its queue, KV "
        "cache and prefix cache; same URL, token and rate limits; a model with a canary keeps gateway routing until the "
        "canary ends). inference-extension is a phase 5 feature (docs/roadmap.md). Defaults to gateway.",
    )
    batch: Flag | None = Field(
        None,
        description="Offline batch inference: per served model a vLLM batch Job template (`vllm run-batch`, sized like the "
        "model) in every team namespace on the GPU clusters (ConfigMap `batch-inference`), queued by Kueue at training "
        "priority, reading its requests from and writing its results to AIStor with the team's own keys, never through the "
        "gateway; every team may then read the served models' weights. Defaults to on from phase 3 (docs/roadmap.md).",
    )
