"""SiteConfig: the one schema of a site stack, read from `fab-platform:site` (DESIGN section 4, "Config first").

Everything a component needs comes from here, validated before any resource is registered. Field
rules live on the models; rules that span fields (overlapping ranges, duplicate ids, GPU clusters
that would be exposed, flows naming unknown clusters) are checked once the whole site is parsed.
A user mistake becomes a `ConfigError` whose lines each name the key path, the value and the fix.

The package is split by concern; import from here, not from its modules:

- `declared`: what the config knows of the components (the engines' needs, the flows they open), declared by
  components/catalog.py;
- `fields`: value types (DNS label, CIDR, port, ...) and site-wide constants;
- `names`: the names derived from config keys (namespaces, Services, buckets, host names) and their limits;
- `schema/`: the models, one module per domain (network, storage, teams, gpu, compute, federation, adopt), and
  `schema/site`, the site's fields that put them together;
- `views`: what is derived from a site (roles, node pools, quotas, the flow table: the design's base flows and
  those the components declare), `SiteViews` on the site's fields, the type the views and checks read a site as;
- `checks/`: the cross-field checks, one module per domain;
- `site`: `SiteConfig`, the root model a site is validated with: the views and fields, and the checks run on them;
- `problems`: key paths and the error carrying cross-field problems;
- `load`: parsing, error lines, secrets and the stack file's JSON Schema.
"""

from components.config.declared import BucketAccess, EngineNeeds, FlowSource, NotDeclared
from components.config.fields import (
    CILIUM_CLUSTER_NAME_MAX,
    CILIUM_POD_MASK,
    CONFIG_KEY,
    GPU_ROLES,
    PROJECT,
    RFC1918,
    WORLD,
    Address,
    Asn,
    Cidr,
    DnsLabel,
    DnsName,
    Flag,
    LabelKey,
    Labels,
    LabelValue,
    ModelName,
    NodeName,
    Port,
    Role,
    Unique,
)
from components.config.load import (
    PROJECT_KEYS,
    SECRET_KEYS,
    ConfigError,
    SiteSecrets,
    config_key_problems,
    load_secrets,
    load_site,
    parse_site,
    stack_file_schema,
)
from components.config.problems import Problem, SiteRuleError, format_path
from components.config.schema.acceptance import AcceptanceConfig, ServingLoopRun, ServingSloTargets
from components.config.schema.adopt import (
    CHECK_RULES,
    OBJECT_REF,
    RELEASE_REF,
    AcceptedFinding,
    AdoptConfig,
    CheckConfig,
    ObjectRef,
    ReleaseRef,
)
from components.config.schema.compute import (
    ArgoCdConfig,
    ComputeConfig,
    ComputeIngressConfig,
    GpuNotebooksConfig,
    JupyterConfig,
    JupyterProfile,
    ServiceToggle,
    ServingRepoConfig,
    SparkConfig,
    StarRocksConfig,
    TrinoConfig,
    ExternalCatalog,
    YuniKornQueue,
)
from components.config.schema.federation import FederationConfig, FederationConsumer, FederationPeer
from components.config.schema.gpu import (
    DEFAULT_GPU_TYPES,
    CanaryConfig,
    GatewayConfig,
    GpuClusterConfig,
    GpuNode,
    GpuSharingConfig,
    GpuType,
    InferenceConfig,
    InferenceModelConfig,
    InfinibandConfig,
    SparkRapidsConfig,
)
from components.config.schema.maintenance import IcebergMaintenanceConfig, MaintenanceTarget, QualityCheck
from components.config.schema.network import CILIUM_RELEASE, BgpPeer, CiliumSettings, ClusterConfig, Flow, LbPool
from components.config.schema.observability import AlertsConfig, ObservabilityConfig, RemoteWriteConfig
from components.config.schema.registry import RegistryConfig
from components.config.schema.storage import (
    AISTOR_POD_LABEL,
    CONTRACT_CLASSES,
    NO_EXPIRY_CLASSES,
    REPLICABLE_CLASSES,
    VERSIONED_CLASSES,
    Bucket,
    BucketName,
    DataClass,
    MinioEndpoint,
    ObjectStoreConfig,
    PolarisConfig,
    PostgresConfig,
    S3Endpoints,
    StorageConfig,
    VendorConfig,
)
from components.config.schema.teams import (
    FeatureSet,
    IdentityConfig,
    KeycloakEndpoint,
    MultiKueueConfig,
    Profile,
    ProfileSchedule,
    ServingLoopConfig,
    Team,
    TeamQuota,
    TrainingConfig,
)
from components.config.site import SiteConfig, declare
from components.config.views import (
    INFERENCE_FLOW,
    INGRESS_FLOW,
    MULTIKUEUE_FLOW,
    PEM_CERTIFICATE,
    POLARIS_FLOW,
    S3_FLOW,
    RemoteTeam,
    credential_holders,
    default_flows,
    replica_bucket,
)

__all__ = [
    # declared
    "BucketAccess", "EngineNeeds", "FlowSource", "NotDeclared", "declare",
    # fields
    "CILIUM_CLUSTER_NAME_MAX", "CILIUM_POD_MASK", "CONFIG_KEY", "GPU_ROLES", "PROJECT", "RFC1918", "WORLD",
    "Address", "Asn", "Cidr", "DnsLabel", "DnsName", "Flag", "LabelKey", "Labels", "LabelValue", "ModelName", "NodeName",
    "Port", "Role", "Unique",
    # schema
    "CHECK_RULES", "OBJECT_REF", "RELEASE_REF", "AcceptedFinding", "AdoptConfig", "CheckConfig", "ObjectRef", "ReleaseRef",
    "ArgoCdConfig", "ComputeConfig", "ComputeIngressConfig", "GpuNotebooksConfig", "JupyterConfig", "JupyterProfile",
    "ServiceToggle",
    "ServingRepoConfig", "SparkConfig",
    "StarRocksConfig", "TrinoConfig", "ExternalCatalog", "YuniKornQueue",
    "IcebergMaintenanceConfig", "MaintenanceTarget", "QualityCheck",
    "FederationConfig", "FederationConsumer", "FederationPeer",
    "DEFAULT_GPU_TYPES", "CanaryConfig", "GatewayConfig", "GpuClusterConfig", "GpuNode", "GpuSharingConfig", "GpuType",
    "InferenceConfig", "SparkRapidsConfig",
    "InferenceModelConfig", "InfinibandConfig",
    "CILIUM_RELEASE", "BgpPeer", "CiliumSettings", "ClusterConfig", "Flow", "LbPool",
    "AlertsConfig", "ObservabilityConfig", "RemoteWriteConfig", "RegistryConfig",
    "AcceptanceConfig", "ServingLoopRun", "ServingSloTargets",
    "AISTOR_POD_LABEL", "CONTRACT_CLASSES", "NO_EXPIRY_CLASSES", "REPLICABLE_CLASSES", "VERSIONED_CLASSES", "Bucket",
    "BucketName", "DataClass", "MinioEndpoint", "ObjectStoreConfig", "PolarisConfig", "PostgresConfig", "S3Endpoints",
    "StorageConfig", "VendorConfig",
    "IdentityConfig", "KeycloakEndpoint", "MultiKueueConfig", "Profile", "ProfileSchedule", "ServingLoopConfig", "FeatureSet", "Team", "TeamQuota", "TrainingConfig",
    # site, views, checks, loading
    "SiteConfig",
    "INFERENCE_FLOW", "INGRESS_FLOW", "MULTIKUEUE_FLOW", "PEM_CERTIFICATE", "POLARIS_FLOW", "S3_FLOW", "RemoteTeam", "credential_holders",
    "default_flows", "replica_bucket",
    "Problem", "SiteRuleError", "format_path",
    "ConfigError", "SiteSecrets", "load_secrets", "load_site", "parse_site", "stack_file_schema",
    "PROJECT_KEYS", "SECRET_KEYS", "config_key_problems",
]
