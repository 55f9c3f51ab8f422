"""What `fabctl verify` needs beyond the site itself (docs/acceptance.md): where its jobs run, the bounds they are
judged by, the load they put on AIStor and the team whose credentials and quota the probes use. Nothing here changes
the stack: the acceptance jobs are applied by `fabctl verify`, never by Pulumi.
"""

from __future__ import annotations

from typing import Literal

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
        description="Largest allowed reduction, in percent of the baseline, of all_reduce_perf's bus bandwidth at its "
        "largest message while warp loads AIStor (the design: NCCL alone, then under storage load, within a set bound). "
        "Defaults to 20.",
    )
    nccl_min_busbw_gb_per_sec: float | None = Field(
        None, gt=0, le=10_000, strict=True,
        description="Lowest allowed bus bandwidth of the baseline run at all_reduce_perf's largest message (its "
        "out-of-place busbw), in GB/s. Defaults to the published floor for the training nodes' GPU type and InfiniBand "
        "rails (docs/acceptance.md, NCCL floors: 270 for H100 and H200 over 8 x 400 Gb/s); where none is published, the "
        "NCCL check does not run until this is set.",
    )
    nccl_hca_link_gbit_per_sec: Literal[100, 200, 400, 800] = Field(
        400,
        description="InfiniBand link rate of the training nodes' HCAs, in Gb/s, one per GPU (EDR 100, HDR 200, NDR 400, "
        "XDR 800): with the GPU type, it selects the published floor of the NCCL check. Defaults to 400 (NDR).",
    )
    nccl_min_message_mib: int = Field(
        64, ge=1, le=65_536, strict=True,
        description="Smallest all_reduce message, in MiB (all_reduce_perf -b). Defaults to 64.",
    )
    nccl_max_message_mib: int | None = Field(
        None, ge=1, le=65_536, strict=True,
        description="Largest all_reduce message, in MiB (all_reduce_perf -e); the sizes double from the smallest, and the "
        "bus bandwidth is read at the last. Defaults to 16384 (16 GiB, where the published floors are read), or, where "
        "the training GPUs' memory (`gpu_types.<type>.memory_mib`) cannot hold all_reduce_perf's three buffers of it "
        "plus 1 GiB, the largest size that fits, at least 8192 (else the NCCL check does not run until this is set).",
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
