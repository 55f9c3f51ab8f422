"""SiteSchema: the fields of a site stack's one schema, the domain models (this package) put together.

`components.config.views.SiteViews` adds the views derived from them, and `components.config.site.SiteConfig`, the
model a site is validated with, the cross-field checks (components.config.checks) that run once the whole site is
parsed. The checks and views read a site through these fields, so they name the schema, never the checked model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from components.config.fields import DnsLabel, Flag, Unique, _Model
from components.config.names import ClusterKey, Domain, FlowKey, GpuTypeKey, ProfileKey, SiteName, TeamKey
from components.config.schema.acceptance import AcceptanceConfig
from components.config.schema.adopt import AdoptConfig, CheckConfig
from components.config.schema.federation import FederationConfig
from components.config.schema.gpu import GpuClusterConfig, GpuType, InferenceConfig
from components.config.schema.network import ClusterConfig, Flow
from components.config.schema.observability import ObservabilityConfig
from components.config.schema.registry import RegistryConfig
from components.config.schema.roadmap import FeatureId, Phase
from components.config.schema.storage import MinioEndpoint, StorageConfig
from components.config.schema.teams import IdentityConfig, KeycloakEndpoint, Profile, ProfileSchedule, Team, TrainingConfig

if TYPE_CHECKING:
    # Resolved by declare(): ComputeConfig with a section for each declared engine that has no field of its own.
    from components.config.schema.compute import ComputeConfig as ComputeSections


class SiteSchema(_Model):
    """The fields of a site; `components.config.SiteConfig` is the model to validate a site with (its checks run)."""


    name: SiteName = Field(description="Site name, for example site-a; prefixes every cluster name.")
    domain: Domain = Field(description="Internal DNS domain of the site, for example site-a.fab.internal.")
    phase: Phase = Field(
        description="The roadmap phase the site is in (docs/roadmap.md): 1 GPU base, 2 inference, 3 training pipeline, "
        "4 operations, 5 scale-out. A feature of a later phase is refused (MultiKueue or a second GPU cluster before 5, "
        "profiles before 4, training quotas before 3) unless `early_features` names it; from phase 2 on, the site serves "
        "models (`inference`).",
    )
    early_features: Annotated[list[FeatureId], Unique] = Field(  # type: ignore[valid-type]
        default_factory=list,
        description="Features of a later phase the site uses ahead of `phase`, each named on purpose (docs/roadmap.md "
        "lists them with their phase). Defaults to none.",
    )
    ca_bundle: str | None = Field(
        None, min_length=1,
        description="PEM file, relative to the project directory, with the CA certificates of the site's PKI that issued "
        "the certificates of its endpoints (AIStor, Keycloak). Every client the program runs trusts it: the MinIO and "
        "Keycloak providers, its own MinIO calls, the pods that call AIStor (weights sync, gold copy, Postgres "
        "backups), and the realm's clients (the inference gateway's JWT keys, the sign-in of Grafana, both JupyterHubs, "
        "Argo CD, Trino, Superset and Airflow), Argo CD's clone of a serving repository under the site's domain, the "
        "serving loop's Git calls, and the S3 clients of Spark (drivers, executors, the Connect server), Trino, StarRocks "
        "and Polaris (trust stores of the site's CA and the public CAs a JVM still needs); `fabctl check` (rule "
        "`trust.site-ca`) proves it of every client it sees (docs/deploy-check.md lists them; Superset's, Airflow's and "
        "the serving loop's are not among them, their chart not being in the offline mirror). Public certificates only. Defaults to the system's trust store.",
    )
    registry: RegistryConfig | None = Field(
        None,
        description="The site's own registry, for a site without internet access (docs/airgap.md): every chart, image, "
        "release file and Spark package comes from it. Defaults to none: each comes from its upstream source.",
    )
    adopt: AdoptConfig = Field(default_factory=AdoptConfig, description="Objects that exist already and are imported, never created over.")
    check: CheckConfig = Field(default_factory=CheckConfig, description="Inputs of the offline deploy check (`fabctl check`).")
    minio: MinioEndpoint = Field(description="The object store's admin endpoint for the minio provider.")
    keycloak: KeycloakEndpoint = Field(description="The site's Keycloak for the keycloak provider.")
    clusters: dict[ClusterKey, ClusterConfig] = Field(min_length=1, description="Clusters by key (storage, compute, gpu, ...).")
    teams: dict[TeamKey, Team] = Field(min_length=1, description="Teams by name (yield, fdc, wafermap, ...).")
    identity: IdentityConfig = Field(default_factory=IdentityConfig, description="Keycloak realm objects of the platform.")
    storage: StorageConfig
    gpu_types: dict[GpuTypeKey, GpuType] = Field(
        default_factory=dict, description="GPU models by key, added to (or replacing) the built-in h100 and h200."
    )
    gpu: dict[DnsLabel, GpuClusterConfig] = Field(description="GPU nodes and operators per gpu or gpu-train cluster key.")
    inference: InferenceConfig | None = Field(
        None, description="Online inference: served models behind the gateway. Required from phase 2; none in phase 1 (GPU base)."
    )
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Kueue quotas and MultiKueue.")
    compute: ComputeSections  # a forward reference declare() resolves: SiteConfig is unusable before it
    federation: FederationConfig = Field(default_factory=FederationConfig, description="Cross-site federation. Defaults to off.")
    profiles: dict[ProfileKey, Profile] = Field(default_factory=dict, description="Named fleet profiles (day, night, ...).")
    active_profile: DnsLabel | None = Field(
        None,
        description="The profile in force; switching is a config change and `pulumi up`. With `profile_schedule`, the "
        "profile the switched objects are created with, and the nodes' pools. Defaults to the base config.",
    )
    profile_schedule: ProfileSchedule | None = Field(
        None,
        description="Switch profiles on a schedule, in the clusters, instead of by `active_profile` and `pulumi up` "
        "(docs/operations.md, \"Scheduled switching\"). Defaults to none: profiles switch by hand.",
    )
    observability: ObservabilityConfig | None = Field(
        None,
        description="Metrics, dashboards and alerts (docs/operations.md, \"Metrics and alerts\"). Defaults to none: no "
        "Prometheus, Grafana or alert rules are deployed.",
    )
    acceptance: AcceptanceConfig = Field(
        default_factory=AcceptanceConfig,
        description="The acceptance jobs of `fabctl verify` (docs/acceptance.md): their namespace, bounds and load.",
    )
    flows: dict[FlowKey, Flow] | None = Field(
        None,
        description="The cross-cluster flow table by name. Defaults to the design's four flows: S3 and Polaris REST "
        "from compute and GPU clusters to storage, the inference gateway from compute to gpu clusters (from phase 2, once "
        "the site serves models), and the "
        "MultiKueue manager on compute to every GPU cluster's API server.",
    )
    global_services: Flag | None = Field(
        None,
        description="Announce Polaris and the inference gateway as Cilium ClusterMesh global services: Polaris's REST Service "
        "(local-first affinity) on every compute and GPU cluster, whose clients then call `polaris-rest.<namespace>.svc`, and "
        "the gateway's Service on compute. The flow table still decides which clusters may connect. Defaults to on from "
        "phase 5 (scale-out).",
    )
