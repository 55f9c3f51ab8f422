"""What `fabctl verify` needs beyond the site itself (docs/acceptance.md): where its jobs run, the bounds they are
judged by, the load they put on AIStor and the team whose credentials and quota the probes use. Nothing here changes
the stack: the acceptance jobs are applied by `fabctl verify`, never by Pulumi.
"""

from __future__ import annotations

from pydantic import Field

from components.config.fields import DnsLabel, LabelValue, _Model


class ServingLoopRun(_Model):
    """A finished run of the serving-loop DAG (docs/mlops.md) that phase 03's check verifies."""

    team: DnsLabel = Field(description="The team the run trained and published for (a key of `teams`).")
    model: DnsLabel = Field(description="The served model the run published a revision of (a key of `inference.models`).")
    revision: LabelValue = Field(
        min_length=1,
        description="The revision the run published: its weights and `metadata.json` are under `<source><revision>/` of "
        "the models bucket.",
    )


class AcceptanceConfig(_Model):
    """The acceptance jobs of each roadmap phase's completion check (`fabctl verify --phase N`)."""

    namespace: DnsLabel = Field(
        "fab-verify",
        description="Namespace of the acceptance jobs on every cluster (Pod Security restricted); `fabctl verify` creates "
        "it when missing and deletes it afterwards. Defaults to fab-verify.",
    )
    team: DnsLabel | None = Field(
        None,
        description="The team whose credentials (its `s3-training` Secret, its gateway client) and namespaces the probes "
        "use. Defaults to the first team by name; for the MultiKueue check, the first team with a GPU quota.",
    )
    nccl_max_reduction_percent: float = Field(
        20.0, gt=0, le=100, strict=True,
        description="Largest allowed reduction, in percent of the baseline, of all_reduce_perf's average bus bandwidth "
        "while warp loads AIStor (the design: NCCL alone, then under storage load, within a set bound). Defaults to 20.",
    )
    nccl_min_busbw_gb_per_sec: float | None = Field(
        None, gt=0, le=10_000, strict=True,
        description="Lowest allowed average bus bandwidth of the baseline run, in GB/s as all_reduce_perf reports it (what "
        "the HCAs should reach: for example 40 per 400 Gb/s port). Defaults to none: only the reduction is judged.",
    )
    nccl_min_message_mib: int = Field(
        64, ge=1, le=65_536, strict=True,
        description="Smallest all_reduce message, in MiB (all_reduce_perf -b). Defaults to 64.",
    )
    nccl_max_message_mib: int = Field(
        4096, ge=1, le=65_536, strict=True,
        description="Largest all_reduce message, in MiB (all_reduce_perf -e); the sizes double from the smallest. Defaults "
        "to 4096.",
    )
    warp_concurrency: int = Field(
        16, ge=1, le=1024, strict=True,
        description="Concurrent uploads of the warp load (checkpoint-like writes). Defaults to 16.",
    )
    warp_object_size_mib: int = Field(
        64, ge=1, le=16_384, strict=True,
        description="Size of each object warp writes, in MiB (a checkpoint shard). Defaults to 64.",
    )
    warp_duration_sec: int = Field(
        1800, ge=60, le=86_400, strict=True,
        description="How long warp runs at most; it is stopped as soon as the NCCL run under load ends, so this only has "
        "to outlast it. Defaults to 1800.",
    )
    storage_baseline_nic_gbps: float = Field(
        200.0, gt=0, le=3200, strict=True,
        description="Line rate of each training node's Ethernet storage bond, in Gb/s (the sum of its member links: 2 x "
        "100 GbE is 200), from which the storage baseline's floors are derived (docs/acceptance.md, phase 01). "
        "Defaults to 200.",
    )
    storage_baseline_min_get_percent: float = Field(
        60.0, gt=0, le=100, strict=True,
        description="Lowest allowed average GET throughput of each training node in the storage baseline, in percent of "
        "`storage_baseline_nic_gbps`. Defaults to 60.",
    )
    storage_baseline_min_put_percent: float = Field(
        40.0, gt=0, le=100, strict=True,
        description="Lowest allowed average PUT throughput of each training node in the storage baseline, in percent of "
        "`storage_baseline_nic_gbps`. Defaults to 40.",
    )
    storage_baseline_min_get_mib_per_sec: float | None = Field(
        None, gt=0, le=1_000_000, strict=True,
        description="Lowest allowed average GET throughput of each training node, in MiB/s as warp reports it, instead "
        "of the percentage of the line rate. Defaults to none: `storage_baseline_min_get_percent` decides.",
    )
    storage_baseline_min_put_mib_per_sec: float | None = Field(
        None, gt=0, le=1_000_000, strict=True,
        description="Lowest allowed average PUT throughput of each training node, in MiB/s as warp reports it, instead "
        "of the percentage of the line rate. Defaults to none: `storage_baseline_min_put_percent` decides.",
    )
    storage_baseline_max_aggregate_get_mib_per_sec: float | None = Field(
        None, gt=0, le=100_000_000, strict=True,
        description="Cap of the aggregate GET floor, in MiB/s: what AIStor is sized to serve the training nodes together. "
        "The aggregate floor is the per-node floor times the nodes, at most this; when it caps, each node's floor is its "
        "equal share. Defaults to none: no cap.",
    )
    storage_baseline_max_aggregate_put_mib_per_sec: float | None = Field(
        None, gt=0, le=100_000_000, strict=True,
        description="Cap of the aggregate PUT floor, in MiB/s, as `storage_baseline_max_aggregate_get_mib_per_sec` for "
        "writes. Defaults to none: no cap.",
    )
    storage_baseline_duration_sec: int = Field(
        30, ge=10, le=3600, strict=True,
        description="How long warp PUTs, then GETs, on each training node of the storage baseline (warp --duration, "
        "each). Defaults to 30.",
    )
    storage_baseline_concurrency: int = Field(
        32, ge=1, le=1024, strict=True,
        description="Concurrent requests of warp on each training node in the storage baseline (warp --concurrent). "
        "Defaults to 32.",
    )
    storage_baseline_object_size_mib: int = Field(
        64, ge=1, le=16_384, strict=True,
        description="Size of each object of the storage baseline, in MiB (warp --obj.size; a checkpoint shard). "
        "Defaults to 64.",
    )
    timeout_sec: int = Field(
        600, ge=30, le=86_400, strict=True,
        description="How long a probe job may take before it counts as failed. Defaults to 600.",
    )
    nccl_timeout_sec: int = Field(
        1800, ge=60, le=86_400, strict=True,
        description="How long each NCCL run may take (image pulls on the training nodes included). Defaults to 1800.",
    )
    recovery_timeout_sec: int = Field(
        1800, ge=60, le=86_400, strict=True,
        description="How long an evicted vLLM pod's replacement may take to serve again (weights are copied to its NVMe "
        "cache first). Defaults to 1800.",
    )
    serving_loop: ServingLoopRun | None = Field(
        None,
        description="The run of the serving-loop DAG that phase 03's check verifies (docs/acceptance.md, phase 03). "
        "Defaults to none: phase 03's check is skipped, with that reason.",
    )
