"""What `fabctl verify` needs beyond the site itself (docs/acceptance.md): where its jobs run, the bounds they are
judged by, the load they put on AIStor and the team whose credentials and quota the probes use. Nothing here changes
the stack: the acceptance jobs are applied by `fabctl verify`, never by Pulumi.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from components.config.fields import DnsLabel, LabelValue, _Model, matching

_criterion_id = matching(
    re.compile(r"^0[1-5]-[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
    "must be a criterion id of `fabctl verify` as its report names it: the phase's two digits, '-', then lowercase "
    "letters, digits and '-' (for example 01-nccl-under-load-gpu)",
    63,
)
CriterionId = Annotated[str, AfterValidator(_criterion_id)]
"""A criterion of a phase's completion check, by the id its report and JUnit case carry (`01-nccl-under-load-gpu`)."""
WaiverReason = Annotated[str, StringConstraints(strip_whitespace=True, min_length=10, max_length=500)]
"""Why a required criterion is accepted without running: a sentence the report repeats (who decided, what stands in)."""


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


class ServingSloTargets(_Model):
    """One served model's own serving SLO (phase 02's load test, docs/acceptance.md): each field left out takes the
    `acceptance.serving_slo_<field>` default."""

    concurrency: int | None = Field(
        None, ge=1, le=1024, strict=True,
        description="Requests in flight at most during the model's run. Defaults to acceptance.serving_slo_concurrency.",
    )
    input_tokens: int | None = Field(
        None, ge=1, le=1_048_576, strict=True,
        description="Prompt length of each request, in tokens of the model's tokenizer. Defaults to "
        "acceptance.serving_slo_input_tokens.",
    )
    output_tokens: int | None = Field(
        None, ge=2, le=1_048_576, strict=True,
        description="Tokens generated per request. Defaults to acceptance.serving_slo_output_tokens.",
    )
    p90_ttft_ms: float | None = Field(
        None, gt=0, le=600_000, strict=True,
        description="Largest allowed P90 time to first token, in ms. Defaults to acceptance.serving_slo_p90_ttft_ms.",
    )
    p90_itl_ms: float | None = Field(
        None, gt=0, le=60_000, strict=True,
        description="Largest allowed P90 inter-token latency, in ms. Defaults to acceptance.serving_slo_p90_itl_ms.",
    )
    min_output_tokens_per_sec: float | None = Field(
        None, gt=0, le=10_000_000, strict=True,
        description="Lowest allowed output token throughput of the run, in tokens/s. Defaults to "
        "acceptance.serving_slo_min_output_tokens_per_sec.",
    )
    max_error_percent: float | None = Field(
        None, ge=0, le=100, strict=True,
        description="Largest allowed share of failed requests, in percent (a 429 counts). Defaults to "
        "acceptance.serving_slo_max_error_percent.",
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
        description="InfiniBand link rate of the training nodes' HCAs, in Gb/s (EDR 100, HDR 200, NDR 400, XDR 800): with "
        "the GPU type and the rails (the HCAs of gpu.<cluster>.infiniband.nccl_hcas, else one per GPU), it selects the "
        "published floor of the NCCL check. Defaults to 400 (NDR).",
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
    serving_slo_concurrency: int = Field(
        8, ge=1, le=1024, strict=True,
        description="Requests in flight at most during each served model's load test (`vllm bench serve "
        "--max-concurrency`), sent at half the team's rate (docs/acceptance.md, phase 02). Defaults to 8.",
    )
    serving_slo_num_prompts: int = Field(
        200, ge=10, le=100_000, strict=True,
        description="Requests of each model's load test: the P90s are over this many. They are sent at half the team's rate, "
        "and fewer where that would last beyond 240 s (the team's token, fetched once, lives 300 s: Keycloak's default). "
        "Defaults to 200.",
    )
    serving_slo_input_tokens: int = Field(
        3000, ge=1, le=1_048_576, strict=True,
        description="Prompt length of each load-test request, in tokens of the model's tokenizer (random prompts, "
        "`--random-input-len`). Defaults to 3000, the input length of Dynamo's SLA example.",
    )
    serving_slo_output_tokens: int = Field(
        150, ge=2, le=1_048_576, strict=True,
        description="Tokens generated per load-test request (`--random-output-len`, end of sequence ignored). Defaults to "
        "150, the output length of Dynamo's SLA example.",
    )
    serving_slo_p90_ttft_ms: float = Field(
        200.0, gt=0, le=600_000, strict=True,
        description="Largest allowed P90 time to first token of each model's load test, in ms, through the gateway. "
        "Defaults to 200 (Dynamo's SLA example: TTFT 200 ms).",
    )
    serving_slo_p90_itl_ms: float = Field(
        20.0, gt=0, le=60_000, strict=True,
        description="Largest allowed P90 inter-token latency of each model's load test, in ms. Defaults to 20 (Dynamo's "
        "SLA example: ITL 20 ms).",
    )
    serving_slo_min_output_tokens_per_sec: float | None = Field(
        None, gt=0, le=10_000_000, strict=True,
        description="Lowest allowed output token throughput of each model's load test, in tokens/s. Defaults to none: "
        "the throughput is reported, not judged (it depends on the GPUs, the replicas and the team's rate).",
    )
    serving_slo_max_error_percent: float = Field(
        1.0, ge=0, le=100, strict=True,
        description="Largest allowed share of failed requests of each model's load test, in percent; a request the "
        "gateway limits (429) is a failed one. Defaults to 1.",
    )
    serving_slo_models: dict[DnsLabel, ServingSloTargets] = Field(
        default_factory=dict,
        description="Per served model (a key of `inference.models`), the load test's settings and targets that differ "
        "from the serving_slo_* defaults. Defaults to none: every model is held to the defaults.",
    )
    serving_loop: ServingLoopRun | None = Field(
        None,
        description="The run of a team's serving-loop DAG that phase 03's check triggers and follows (docs/acceptance.md, "
        "phase 03). Defaults to none: phase 03's check cannot run, so phase 03 is INCOMPLETE unless "
        "`waivers` names 03-serving-loop with a reason.",
    )
    waivers: dict[CriterionId, WaiverReason] = Field(
        default_factory=dict,
        description="Required criteria accepted without running, each with the reason the report repeats (docs/roadmap.md, "
        "\"Required criteria and waivers\"): a required criterion that cannot run on the site (too few training nodes, no "
        "published floor for its GPUs, no serving-loop team) makes its phase INCOMPLETE unless it is waived here. `fabctl "
        "verify` refuses a waiver of a criterion that runs or that the phase does not require, so the list stays honest. "
        "Defaults to none.",
    )
