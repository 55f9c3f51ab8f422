"""Teams and what they are given: the site's Keycloak realm, each team's GPU quotas, MultiKueue and
day/night profiles (DESIGN section 1, "Who uses it", and section 2, training on the gpu and gpu-train clusters).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from components.config.fields import (
    MAX_CORES,
    MAX_GPUS,
    MAX_MEMORY_GIB,
    CronSchedule,
    DnsLabel,
    Flag,
    HttpsUrl,
    LabelKey,
    ModelName,
    NodeName,
    TimeZone,
    Unique,
    _Model,
    matching,
)
from components.config.names import ProfileKey

IMAGE_REPOSITORY = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)+")
"""An image repository with its registry and no tag or digest: `<host>[:<port>]/<path>`, the path in lowercase."""
ImageRepository = Annotated[str, AfterValidator(matching(
    IMAGE_REPOSITORY, "must be an image repository with its registry and without a tag or digest, such as "
    "registry.site-a.fab.internal/wafermap/train", 255))]
FEATURE_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
FeatureTable = Annotated[str, AfterValidator(matching(
    FEATURE_TABLE, "must be a table of the catalog as <namespace>.<table> (letters, digits and '_')", 255))]


class KeycloakEndpoint(_Model):
    """The site's existing Keycloak, used by the keycloak provider."""

    url: HttpsUrl = Field(
        description="Base URL, https only, without a trailing '/', for example `https://keycloak.site-a.fab.internal` "
        "(with the `/auth` base path on Keycloak before 17)."
    )
    admin_realm: DnsLabel = Field("master", description="Realm of the provider's service-account client. Defaults to master.")
    client_id: str = Field(
        "fab-platform-pulumi", min_length=1,
        description="Client id the provider signs in with; `KEYCLOAK_CLIENT_ID` in the environment takes precedence (CI "
        "previews sign in with a read-only client). Defaults to fab-platform-pulumi.",
    )


class FeatureSet(_Model):
    """A feature table a team's serving loop writes in its step (a) (docs/mlops.md): the platform's feature job runs the
    SELECT and writes its result to the table, then tags the snapshot for the run."""

    table: FeatureTable = Field(description="The table in the catalog (Polaris), `<namespace>.<table>`: created on the first "
                                "run, overwritten after.")
    sql: str = Field(
        min_length=1, max_length=65536,
        description="The SELECT computing the features. It runs as the Spark engine, which reads every table and writes the "
        "raw and warehouse buckets: review it as such, here, where no run can change it.",
    )


class ServingLoopConfig(_Model):
    """The team's serving-loop DAG `serving_loop_<team>` (docs/mlops.md): the team is the DAG's, not a run's; only the
    team's Airflow role (its Keycloak group `team-<team>`) sees and triggers it; a run picks its training image and its
    features from these lists alone. The feature step's Spark image and job are the platform's."""

    training_images: Annotated[list[ImageRepository], Unique] = Field(
        min_length=1,
        description="Image repositories a run's `training_image` may come from, without tag or digest (for example "
        "`registry.site-a.fab.internal/wafermap/train`); a run names one of them with a tag or a digest. The training Job "
        "runs it with the team's keys, in the team's namespace.",
    )
    features: dict[DnsLabel, FeatureSet] = Field(
        min_length=1, description="The feature sets a run may name (its `features` parameter): key -> table and SELECT."
    )


class Team(_Model):
    """A team of the fab that owns quotas, namespaces and a Keycloak group."""

    description: str = Field("", description="What the team does, shown on its Keycloak group.")
    serving_loop: ServingLoopConfig | None = Field(
        None,
        description="The team's serving-loop DAG in Airflow (`serving_loop_<team>`, docs/mlops.md), its training images and "
        "feature sets. Needs Spark and Airflow. Defaults to none: the team has no serving loop.",
    )


class IdentityConfig(_Model):
    """The site's Keycloak realm and what the platform declares in it."""

    realm: DnsLabel = Field("fab", description="Realm of the platform's users, groups and clients. Defaults to fab.")
    create_realm: Flag = Field(
        False,
        description="Create the realm (protected from deletion). Defaults to false: the realm exists and is referenced.",
    )


class TeamQuota(_Model):
    """A team's guaranteed share of one GPU cluster's training pool, as Kueue quotas."""

    gpus: int = Field(ge=0, le=MAX_GPUS, strict=True, description="Nominal nvidia.com/gpu quota.")
    cpu: int | None = Field(None, ge=0, le=MAX_CORES, strict=True, description="Nominal CPU cores. Defaults to 16 per GPU.")
    memory_gib: int | None = Field(None, ge=0, le=MAX_MEMORY_GIB, strict=True, description="Nominal memory. Defaults to 128 GiB per GPU.")
    borrowing_limit_gpus: int | None = Field(
        None, ge=0, le=MAX_GPUS, strict=True, description="GPUs the team may borrow from the cohort on top. Defaults to no limit."
    )
    lending_limit_gpus: int | None = Field(
        None, ge=0, le=MAX_GPUS, strict=True,
        description="GPUs of its quota the team lends to the cohort at most; at most `gpus` (Kueue refuses more). Defaults to all unused.",
    )

    @property
    def cpu_cores(self) -> int:
        return self.cpu if self.cpu is not None else 16 * self.gpus

    @property
    def memory(self) -> int:
        return self.memory_gib if self.memory_gib is not None else 128 * self.gpus


class MultiKueueConfig(_Model):
    """MultiKueue: the compute cluster as manager, dispatching to GPU worker clusters."""

    enabled: Flag = Field(False, description="Make the compute cluster a MultiKueue manager. Defaults to false.")
    manager: DnsLabel | None = Field(
        None, description="Manager cluster key: the compute cluster, where jobs are submitted (the only value allowed). Defaults to it."
    )
    workers: Annotated[list[DnsLabel], Unique] = Field(default_factory=list, description="Worker cluster keys (gpu or gpu-train).")


class TrainingConfig(_Model):
    """Kueue on every GPU cluster: team quotas, topology-aware placement, optional MultiKueue."""

    topology_levels: Annotated[list[LabelKey], Unique] = Field(
        default_factory=lambda: ["fab.internal/block", "fab.internal/rack", "kubernetes.io/hostname"],
        min_length=1, max_length=16,
        description="Node labels from the widest to the narrowest topology domain, for topology-aware scheduling "
        "(a Kueue Topology: at most 16 levels, `kubernetes.io/hostname` only as the last). "
        "Defaults to fab.internal/block, fab.internal/rack, kubernetes.io/hostname.",
    )
    group_prefix: str = Field(
        "oidc:", description="Prefix the API servers' OIDC authenticator puts on group names. Defaults to oidc:."
    )
    multikueue: MultiKueueConfig = Field(default_factory=MultiKueueConfig, description="MultiKueue dispatch.")
    quotas: dict[DnsLabel, dict[DnsLabel, TeamQuota]] = Field(
        default_factory=dict, description="Team -> GPU cluster -> quota. A team without quota on a cluster gets none there."
    )
    runtimes: Flag | None = Field(
        None,
        description="Kubeflow Trainer (with the JobSet it bundles) on every GPU cluster and the MultiKueue manager: teams "
        "submit TrainJobs and JobSets through Kueue, and the platform's multi-node PyTorch runtime `fab-torch-distributed` "
        "(NCCL over InfiniBand, checkpoints to the NVMe cache and on to AIStor). Defaults to on from phase 03 (training "
        "pipeline); false leaves Jobs as the only training interface.",
    )
    checkpoint_cache_gib: int = Field(
        512, ge=1, le=65536, strict=True,
        description="NVMe cache per training node of the PyTorch runtime, in GiB: the ephemeral volume checkpoints are "
        "written to before they are uploaded to AIStor. Defaults to 512.",
    )
    ray: Flag | None = Field(
        None,
        description="KubeRay on every GPU cluster: RayJobs and RayClusters queued by Kueue (and MultiKueue), a Ray cluster "
        "template and Ray token in every team namespace, and Jupyter on compute reaching its team's Ray head (client port). "
        "Defaults to on from phase 3 (training pipeline).",
    )


class Profile(_Model):
    """A named state of the GPU fleet (for example day and night); only what differs from the base config."""

    description: str = Field("", description="When the profile is used.")
    node_pools: dict[DnsLabel, dict[NodeName, Literal["inference", "training"]]] = Field(
        default_factory=dict, description="GPU cluster -> node -> pool, overriding the nodes' `pool`."
    )
    replicas: dict[ModelName, Annotated[int, Field(ge=1, le=1024, strict=True)]] = Field(
        default_factory=dict,
        description="vLLM replicas per model, overriding the sizing; at least one (a served model keeps serving), and they must "
        "pack onto the profile's inference nodes.",
    )
    quotas: dict[DnsLabel, dict[DnsLabel, TeamQuota]] = Field(
        default_factory=dict, description="Team -> GPU cluster -> quota, overriding `training.quotas`."
    )


class ProfileSchedule(_Model):
    """Profiles switched on a schedule: on each cluster whose queues or serving replicas differ between the profiles, a
    CronJob per profile applies that profile's values (docs/operations.md, "Scheduled switching")."""

    timezone: TimeZone = Field(
        description="IANA time zone the times are in, for example Europe/Berlin (the CronJobs' `timeZone`: daylight saving "
        "time moves with it)."
    )
    switches: dict[ProfileKey, CronSchedule] = Field(
        description="Profile -> when it takes over, as a cron schedule (minute hour day-of-month month day-of-week, for "
        "example `0 19 * * 1-5`). At least two profiles; none may move nodes between pools (a switch does not drain them)."
    )
    suspend: Flag = Field(
        False,
        description="Suspend every switch (the CronJobs' `suspend`): the fields stay as the last switch left them, and "
        "`pulumi up` still leaves them alone. Defaults to false.",
    )
