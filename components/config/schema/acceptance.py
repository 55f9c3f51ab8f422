"""What `fabctl verify` needs beyond the site itself (docs/acceptance.md): where its jobs run, the bounds they are
judged by, the load they put on AIStor and the team whose credentials and quota the probes use. Nothing here changes
the stack: the acceptance jobs are applied by `fabctl verify`, never by Pulumi.
"""

from __future__ import annotations

from pydantic import Field

from components.config.fields import DnsLabel, LabelValue, _Model


class ServingLoopRun(_Model):
    """The run of a team's serving-loop DAG (docs/mlops.md) that phase 03's check triggers and follows (docs/acceptance.md)."""

    team: DnsLabel = Field(description="The team whose DAG `serving_loop_<team>` the check triggers (a key of `teams` with a "
                           "`serving_loop`).")
    model: DnsLabel = Field(description="The served model the run publishes a revision of (a key of `inference.models`).")
    features: DnsLabel = Field(description="The run's `features`: one of the team's feature sets "
                               "(`teams.<team>.serving_loop.features`).")
    training_image: str = Field(
        min_length=1, max_length=512,
        description="The run's `training_image`: an image of one of the team's `training_images` repositories, with a tag or "
        "a digest (the DAG refuses any other).",
    )
    code_revision: str = Field("fab-verify", min_length=1, max_length=128,
                               description="The run's `code_revision`, recorded in metadata.json. Defaults to fab-verify.")
    revision: LabelValue | None = Field(
        None,
        description="The revision the run publishes (`<source><revision>/` of the models bucket). Defaults to none: each "
        "check names its run `fab-verify-<UTC time>` and the DAG publishes it under that run's name, so that a second "
        "check does not collide with the first.",
    )
    timeout_sec: int = Field(
        21_600, ge=600, le=604_800, strict=True,
        description="How long the run may take from trigger to its last task (features, training, publish, serving "
        "change). Defaults to 21600 (6 h).",
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
        description="The run of a team's serving-loop DAG that phase 03's check triggers and follows (docs/acceptance.md, "
        "phase 03). Defaults to none: phase 03's check is skipped, with that reason.",
    )
