"""SiteConfig: the one schema of a site stack, read from `fab-platform:site` (DESIGN section 4, "Config first").

Everything a component needs comes from here, validated before any resource is registered. Field
rules live on the models; rules that span fields (overlapping ranges, duplicate ids, GPU clusters
that would be exposed, flows naming unknown clusters) are checked once the whole site is parsed.
A user mistake becomes a `ConfigError` whose lines each name the key path, the value and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
import dataclasses
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from itertools import combinations
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

PROJECT = "fab-platform"
CONFIG_KEY = "site"
"""The stack config key, `fab-platform:site`, that holds the whole site object."""

Role = Literal["storage", "compute", "gpu", "gpu-train"]
GPU_ROLES: frozenset[str] = frozenset({"gpu", "gpu-train"})
WORLD = "world"
"""A flow source meaning "outside every cluster of the site" (users, instruments, vendors)."""

RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
CILIUM_CLUSTER_NAME_MAX = 32
"""Cilium refuses cluster names longer than this (ClusterMesh identity and etcd key limits)."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_NAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _text(value: Any) -> Any:
    """Addresses and ranges must be written as text: YAML `1` or `true` is not a network."""
    if not isinstance(value, str):
        raise ValueError(f"must be written as a string such as '10.0.0.0/16' or '10.0.0.1', not a {type(value).__name__}")
    return value


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError("must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters")
    return value


def _dns_name(value: str) -> str:
    if not _DNS_NAME.fullmatch(value):
        raise ValueError("must be a lowercase DNS name such as site-a.fab.internal")
    return value


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        if not _LABEL_KEY.fullmatch(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE.fullmatch(val):
            raise ValueError(f"label value {val!r} of {key!r} is not a valid Kubernetes label value")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsName = Annotated[str, AfterValidator(_dns_name)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
Asn = Annotated[int, Field(ge=1, le=4_294_967_294, strict=True)]
def _cidr(value: Any) -> Any:
    value = _text(value)
    try:
        ipaddress.IPv4Network(value)
    except ValueError as exc:
        if "host bits set" in str(exc):
            raise ValueError(f"has host bits set; the range is {ipaddress.IPv4Network(value, strict=False)}") from None
        raise ValueError("must be an IPv4 range such as 10.64.0.0/16") from None
    return value


Cidr = Annotated[IPv4Network, BeforeValidator(_cidr)]
Address = Annotated[IPv4Address, BeforeValidator(_text)]
Flag = Annotated[bool, Field(strict=True)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class BgpPeer(_Model):
    """A BGP neighbour of every node of the cluster, usually a top-of-rack switch."""

    address: Address = Field(description="Peer IPv4 address.")
    asn: Asn = Field(description="Peer autonomous system number.")
    kind: Literal["private", "public"] = Field(
        "private",
        description="private peers receive Pod CIDRs and internal LoadBalancer IPs; public peers receive external "
        "LoadBalancer IPs only. Defaults to private.",
    )


class LbPool(_Model):
    """A Cilium LB-IPAM pool; a Service takes addresses from it by the label `lb.fab.internal/pool: <name>`."""

    cidrs: list[Cidr] = Field(min_length=1, description="Address blocks of the pool.")
    visibility: Literal["internal", "external"] = Field(
        "internal",
        description="internal pools must be RFC1918 and are advertised to private peers only; external pools are "
        "advertised to public peers only and are not allowed on GPU clusters. Defaults to internal.",
    )


class CiliumSettings(_Model):
    """How Cilium itself is handled on a cluster."""

    managed: Flag = Field(
        True,
        description="Install and upgrade Cilium with its pinned Helm chart; on a running cluster, adopt its existing "
        "release (`adopt.helm_releases`). Set false where Cilium is installed by other means: only its BGP, LB-IPAM and "
        "policy objects are then managed, and joining the ClusterMesh is up to that installation. Defaults to true.",
    )
    operator_replicas: int = Field(2, ge=1, le=5, strict=True, description="cilium-operator replicas. Defaults to 2.")
    hubble_ui: Flag = Field(True, description="Deploy the Hubble UI next to Hubble Relay. Defaults to true.")


RELEASE_REF = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _release_ref(value: str) -> str:
    if len(value) > 117 or not RELEASE_REF.fullmatch(value):
        raise ValueError("must be <namespace>/<release name>, for example kube-system/cilium")
    return value


ReleaseRef = Annotated[str, AfterValidator(_release_ref)]
CILIUM_RELEASE = "kube-system/cilium"
"""Where the program installs Cilium (namespace/release): what an existing installation is adopted as."""


class ClusterConfig(_Model):
    """One Kubernetes cluster of the site."""

    role: Role = Field(description="What runs on the cluster: storage, compute, gpu (inference and training) or gpu-train.")
    kubeconfig_context: str | None = Field(
        None, min_length=1, description="kubeconfig context of the cluster. Defaults to `<site>-<cluster key>`."
    )
    cluster_id: int = Field(ge=1, le=255, strict=True, description="Cilium ClusterMesh id, unique in the site.")
    pod_cidr: Cidr = Field(description="Pod range, routed natively and advertised over BGP.")
    node_cidr: Cidr = Field(description="Node addresses; remote clusters' agents reach ClusterMesh from here.")
    api_server: Address = Field(
        description="kube-apiserver VIP. An address, not a name: Cilium's kube-proxy replacement needs it before DNS works."
    )
    api_server_port: Port = Field(6443, description="kube-apiserver port. Defaults to 6443.")
    bgp_asn: Asn = Field(description="Local autonomous system number of the cluster's nodes, unique in the site.")
    bgp_peers: dict[DnsLabel, BgpPeer] = Field(min_length=1, description="BGP peers by name.")
    lb_pools: dict[DnsLabel, LbPool] = Field(min_length=1, description="LB-IPAM pools by name.")
    clustermesh_pool: DnsLabel = Field(
        "internal", description="Internal pool that exposes the ClusterMesh API server. Defaults to `internal`."
    )
    clustermesh_vip: Address = Field(
        description="Fixed address of the ClusterMesh API server in `clustermesh_pool`; the other clusters dial it."
    )
    host_network_namespaces: list[DnsLabel] = Field(
        default_factory=list,
        description="Namespaces allowed to run host-network or privileged pods (operators, RDMA). Such pods are "
        "invisible to Cilium policy, so they are named here. Defaults to none.",
    )
    cilium: CiliumSettings = Field(default_factory=CiliumSettings, description="Cilium installation settings.")


class Flow(_Model):
    """One allowed cross-cluster flow. Everything between clusters that is not a flow is denied."""

    description: str = Field("", description="Why the flow exists, shown on the generated policy.")
    sources: list[str] = Field(
        default_factory=list, alias="from",
        description=f"Source cluster keys, or `{WORLD}` for clients outside the site's clusters. A flow needs `from`, "
        "`from_cidrs` or both.",
    )
    from_cidrs: list[Cidr] = Field(
        default_factory=list,
        description="Source ranges outside the site's clusters (another site's, for federation), admitted by address. "
        "Defaults to none.",
    )
    to: list[str] = Field(min_length=1, description="Destination cluster keys.")
    port: Port = Field(description="Service port the clients dial.")
    target_port: Port | None = Field(
        None,
        description="Port of the pods behind the Service, which is what Cilium policy sees after load balancing. "
        "Defaults to `port`.",
    )
    protocol: Literal["TCP", "UDP"] = Field("TCP", description="Transport protocol. Defaults to TCP.")
    target: Literal["pods", "kube-apiserver"] = Field(
        "pods",
        description="pods: an ingress rule on the destination's pods in `to_namespace`. kube-apiserver: the "
        "destination's API server VIP, enforced as an egress rule on the source pods in `from_namespace`, "
        "since the API server is not a Cilium endpoint. Defaults to pods.",
    )
    to_namespace: DnsLabel | None = Field(None, description="Destination namespace (pods flows).")
    to_labels: Labels = Field(default_factory=dict, description="Destination pod labels (pods flows). Defaults to every pod of the namespace.")
    from_namespace: DnsLabel | None = Field(
        None, description="Source namespace: optional for pods flows, required for kube-apiserver flows."
    )
    from_labels: Labels = Field(default_factory=dict, description="Source pod labels. Defaults to every pod of the namespace.")

    @property
    def pod_port(self) -> int:
        return self.target_port or self.port


class MinioEndpoint(_Model):
    """Admin endpoint of the site's AIStor (MinIO) object store, used by the minio provider."""

    server: str = Field(min_length=1, description="host:port of the S3/admin API, for example `s3-admin.storage.site-a.fab.internal:9000`.")
    ssl: Flag = Field(True, description="Use TLS. Defaults to true.")
    region: str = Field("us-east-1", min_length=1, description="S3 region name. Defaults to us-east-1.")


class KeycloakEndpoint(_Model):
    """The site's existing Keycloak, used by the keycloak provider."""

    url: str = Field(pattern=r"^https://", description="Base URL, https only, for example `https://keycloak.site-a.fab.internal`.")
    admin_realm: DnsLabel = Field("master", description="Realm of the provider's service-account client. Defaults to master.")
    client_id: str = Field(
        "fab-platform-pulumi", min_length=1,
        description="Client id the provider signs in with; `KEYCLOAK_CLIENT_ID` in the environment takes precedence (CI "
        "previews sign in with a read-only client). Defaults to fab-platform-pulumi.",
    )


# --------------------------------------------------------------------------------------------------
# Teams, identity and storage (StorageCluster, SiteIdentity).

DataClass = Literal["raw", "warehouse", "datasets", "models", "checkpoints", "gold", "backups", "olap"]
VERSIONED_CLASSES: frozenset[str] = frozenset({"warehouse", "models", "checkpoints"})
"""Classes whose buckets are always versioned: table data, model weights and checkpoints must survive a bad write."""
REPLICABLE_CLASSES: frozenset[str] = frozenset({"gold"})
"""The only class that may be copied to another site (data residency, export control)."""
NO_EXPIRY_CLASSES: frozenset[str] = frozenset({"warehouse", "models", "gold"})
"""Classes whose current objects never expire by lifecycle: Iceberg files are removed by snapshot expiry, not ILM."""
CONTRACT_CLASSES = ("warehouse", "models", "checkpoints")
"""Classes with exactly one bucket per site: their names are part of the stack's contracts."""

AISTOR_POD_LABEL = "aistor.min.io/objectStore"
"""The label the AIStor operator puts on an object store's pods, valued with the object store's name."""

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def _bucket_name(value: str) -> str:
    if not _BUCKET.fullmatch(value):
        raise ValueError("must be an S3 bucket name: 3-63 lowercase letters, digits and '-', starting and ending with a letter or digit")
    return value


BucketName = Annotated[str, AfterValidator(_bucket_name)]


class Team(_Model):
    """A team of the fab that owns quotas, namespaces and a Keycloak group."""

    description: str = Field("", description="What the team does, shown on its Keycloak group.")


class IdentityConfig(_Model):
    """The site's Keycloak realm and what the platform declares in it."""

    realm: DnsLabel = Field("fab", description="Realm of the platform's users, groups and clients. Defaults to fab.")
    create_realm: Flag = Field(
        False,
        description="Create the realm (protected from deletion). Defaults to false: the realm exists and is referenced.",
    )


class AdoptConfig(_Model):
    """Objects that exist already: imported into the stack (Pulumi `import`) on the next `pulumi up`, whose preview
    shows the import and then what changes on them. Anything that exists and is not listed here is never created
    over: creating it fails. `python -m fabctl import` writes the same list as a `pulumi import` file."""

    buckets: list[BucketName] = Field(default_factory=list, description="Buckets (of `storage.buckets`, or federation replicas) that exist in the object store. Defaults to none.")
    minio_users: list[str] = Field(
        default_factory=list,
        description="MinIO users of the platform (`fab-<engine>`, `fab-replica-<site>`) that exist; creating one would "
        "reset its secret. Defaults to none.",
    )
    minio_policies: list[str] = Field(
        default_factory=list, description="MinIO policies of the platform (same names as its users) that exist. Defaults to none."
    )
    realm: Flag = Field(False, description="The realm `identity.realm` exists; needs `identity.create_realm`. Defaults to false.")
    namespaces: dict[DnsLabel, list[DnsLabel]] = Field(
        default_factory=dict, description="Cluster key -> namespaces the platform creates there that exist already. Defaults to none."
    )
    helm_releases: dict[DnsLabel, list[ReleaseRef]] = Field(
        default_factory=dict,
        description=f"Cluster key -> `<namespace>/<release>` of releases the platform installs there that exist already, "
        f"such as `{CILIUM_RELEASE}`. Defaults to none.",
    )
    _claimed: set[tuple[str, ...]] = PrivateAttr(default_factory=set)

    def claims(self, kind: str, *key: str) -> bool:
        """Whether the object is declared as existing; recorded, so that `unclaimed()` names declarations nothing matched."""
        declared = {
            "bucket": lambda b: b in self.buckets,
            "minio_user": lambda u: u in self.minio_users,
            "minio_policy": lambda p: p in self.minio_policies,
            "realm": lambda: self.realm,
            "namespace": lambda cluster, name: name in self.namespaces.get(cluster, []),
            "helm_release": lambda cluster, ref: ref in self.helm_releases.get(cluster, []),
        }[kind](*key)
        if declared:
            self._claimed.add((kind, *key))
        return declared

    def declared(self) -> list[tuple[tuple[str | int, ...], tuple[str, ...]]]:
        """(key path, claim) of every declaration."""
        out: list[tuple[tuple[str | int, ...], tuple[str, ...]]] = []
        out += [(("adopt", "buckets", i), ("bucket", b)) for i, b in enumerate(self.buckets)]
        out += [(("adopt", "minio_users", i), ("minio_user", u)) for i, u in enumerate(self.minio_users)]
        out += [(("adopt", "minio_policies", i), ("minio_policy", p)) for i, p in enumerate(self.minio_policies)]
        out += [(("adopt", "realm"), ("realm",))] if self.realm else []
        out += [(("adopt", "namespaces", c, i), ("namespace", c, n)) for c, names in sorted(self.namespaces.items()) for i, n in enumerate(names)]
        out += [(("adopt", "helm_releases", c, i), ("helm_release", c, r)) for c, refs in sorted(self.helm_releases.items()) for i, r in enumerate(refs)]
        return out

    def unclaimed(self) -> list[str]:
        """Declarations that matched no object the program manages, as error lines."""
        return [f"{_where(path)}: {claim[-1]!r} is not an object the platform manages; remove it or fix the name"
                for path, claim in self.declared() if claim not in self._claimed and claim != ("realm",)]


CHECK_RULES = (
    "order.crd", "order.namespace", "references", "readiness.load-balancer", "readiness.deadlock",
    "scheduling.fit", "scheduling.node-agent", "images.pinned", "charts.pinned", "charts.values", "charts.render",
)
"""The rules of `fabctl check` (docs/deploy-check.md), which `check.accept` names."""

OBJECT_REF = re.compile(r"^[A-Z][A-Za-z0-9]* ([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.:]*[a-z0-9])?$")


def _object_ref(value: str) -> str:
    if not OBJECT_REF.fullmatch(value):
        raise ValueError("must be `Kind namespace/name` or `Kind name` (cluster-scoped), for example `Secret fdc/registry-pull`")
    return value


ObjectRef = Annotated[str, AfterValidator(_object_ref)]


class AcceptedFinding(_Model):
    """A `fabctl check` finding the site accepts, with the reason; it is then reported, and no longer an error."""

    rule: Literal[CHECK_RULES] = Field(description="The finding's rule, as `fabctl check` prints it in brackets.")  # type: ignore[valid-type]
    cluster: DnsLabel = Field(description="Key of the cluster the finding is on.")
    object: ObjectRef = Field(description="The object, as the finding names it: `Kind namespace/name` or `Kind name`.")
    reason: str = Field(min_length=10, description="Why the site accepts it, for the reviewers of the next change.")


class CheckConfig(_Model):
    """What `fabctl check` (the offline deploy check) cannot see on its own."""

    existing: dict[DnsLabel, list[ObjectRef]] = Field(
        default_factory=dict,
        description="Cluster key -> objects that exist before the program runs and that its objects use (`Kind "
        "namespace/name` or `Kind name`: a registry pull Secret, a default StorageClass, `CustomResourceDefinition "
        "<plural>.<group>`, the plural exactly as the CRD names it). Defaults to none.",
    )
    accept: list[AcceptedFinding] = Field(default_factory=list, description="Findings accepted with a reason. Defaults to none.")


class Bucket(_Model):
    """One bucket of the object store."""

    data_class: DataClass = Field(
        alias="class",
        description="raw (FDC traces, STDF, images; site-local), warehouse (Iceberg data and metadata), datasets, "
        "models, checkpoints, gold (summary tables; the only class that may replicate), backups (Postgres), "
        "olap (StarRocks shared-data storage of its own tables and materialized views).",
    )
    retention_days: int | None = Field(
        None, ge=1, strict=True,
        description="Expire current objects after this many days. Not allowed on warehouse, models and gold. Defaults to keeping them.",
    )
    noncurrent_expiry_days: int | None = Field(
        None, ge=1, strict=True,
        description="Expire noncurrent versions after this many days (versioned classes only). Defaults to keeping them.",
    )

    @property
    def versioned(self) -> bool:
        return self.data_class in VERSIONED_CLASSES


class ObjectStoreConfig(_Model):
    """The AIStor object store on the storage cluster."""

    install: Flag = Field(
        False,
        description="Install AIStor with the vendor's pinned Helm charts (needs the secret config `aistorLicense`). "
        "Defaults to false: the existing deployment is adopted and only buckets and access are managed.",
    )
    namespace: DnsLabel = Field("aistor", description="Namespace of the object store. Defaults to aistor.")
    name: DnsLabel = Field("aistor", description="Name of the object store. Defaults to aistor.")
    pod_labels: Labels = Field(
        default_factory=dict,
        description="Labels of the object store's S3 pods, which the S3 Services select. Defaults to the labels the "
        "AIStor operator sets for `name`.",
    )
    @property
    def s3_pod_labels(self) -> dict[str, str]:
        """Labels of the object store's S3 pods: `pod_labels`, or what the AIStor operator sets for `name`."""
        return dict(self.pod_labels) or {AISTOR_POD_LABEL: self.name}

    root_user: str = Field("fab-admin", min_length=3, description="Root user of an installed object store; its password is the secret config `aistorRootPassword`. Defaults to fab-admin.")
    s3_port: Port = Field(9000, description="S3 API port of the pods and of both endpoints. Defaults to 9000.")
    tls: Flag = Field(True, description="The S3 API serves TLS (AIStor's default). Defaults to true.")
    table_catalog: Flag = Field(
        False,
        description="AIStor's built-in Iceberg table catalog. Must stay false: Polaris is the only catalog authority.",
    )
    servers: int = Field(4, ge=1, strict=True, description="Servers of the pool when installing. Defaults to 4.")
    volumes_per_server: int = Field(4, ge=1, strict=True, description="Drives per server when installing. Defaults to 4.")
    volume_size_gib: int = Field(1024, ge=1, strict=True, description="Size of each drive when installing. Defaults to 1024.")
    storage_class: str | None = Field(None, min_length=1, description="StorageClass of the drives when installing. Defaults to the cluster's default.")


class S3Endpoints(_Model):
    """The two S3 VIPs: internal for compute and GPU clusters, external (optional) for users outside the clusters."""

    internal_pool: DnsLabel = Field("internal", description="Internal pool of the storage cluster. Defaults to internal.")
    internal_vip: Address = Field(description="Fixed address of the internal S3 endpoint in `internal_pool`.")
    external_pool: DnsLabel | None = Field(None, description="External pool of the storage cluster. Defaults to no external endpoint.")
    external_vip: Address | None = Field(None, description="Fixed address of the external S3 endpoint in `external_pool`.")


class PostgresConfig(_Model):
    """The CloudNativePG cluster behind Polaris."""

    instances: int = Field(3, ge=1, le=9, strict=True, description="Postgres instances (one primary, the rest replicas). Defaults to 3.")
    storage_gib: int = Field(20, ge=1, strict=True, description="Volume size of each instance. Defaults to 20.")
    storage_class: str | None = Field(None, min_length=1, description="StorageClass of the volumes. Defaults to the cluster's default.")
    backup_bucket: BucketName = Field(description="Bucket of class backups that receives base backups and WAL.")
    backup_retention_days: int = Field(30, ge=1, strict=True, description="Recovery window kept in the backup bucket. Defaults to 30.")


class PolarisConfig(_Model):
    """Apache Polaris, the site's only Iceberg REST catalog."""

    namespace: DnsLabel = Field("polaris", description="Namespace of Polaris and its database. Defaults to polaris.")
    realm: DnsLabel = Field("fab", description="Polaris realm. Defaults to fab.")
    catalog: DnsLabel = Field("fab", description="Catalog (warehouse) name over the warehouse bucket. Defaults to fab.")
    pool: DnsLabel = Field("internal", description="Internal pool of the storage cluster for the REST endpoint. Defaults to internal.")
    vip: Address = Field(description="Fixed address of the Polaris REST endpoint in `pool`.")
    port: Port = Field(8181, description="Polaris REST port. Defaults to 8181.")
    replicas: int = Field(2, ge=1, le=10, strict=True, description="Polaris server replicas. Defaults to 2.")
    postgres: PostgresConfig


class StorageConfig(_Model):
    """What runs on the storage cluster: the object store, its buckets and access, and Polaris."""

    object_store: ObjectStoreConfig = Field(default_factory=ObjectStoreConfig, description="The AIStor object store.")
    s3: S3Endpoints
    buckets: dict[BucketName, Bucket] = Field(min_length=1, description="Buckets by name.")
    polaris: PolarisConfig


# --------------------------------------------------------------------------------------------------
# GPU clusters and inference (GpuCluster, InferencePool).

NodeName = Annotated[str, AfterValidator(_dns_name)]
ModelName = DnsLabel


class GpuType(_Model):
    """A GPU model: its memory as the driver reports it, and the product label GPU feature discovery sets."""

    memory_mib: int = Field(ge=1024, strict=True, description="Memory per GPU in MiB, as nvidia-smi reports it.")
    product: str = Field(min_length=1, description="Value of the node label nvidia.com/gpu.product.")


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
    system_nodes: list[NodeName] = Field(
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

    source: str = Field(min_length=1, description="Path of the weights inside the models bucket, for example meta/llama-3.3-70b-instruct/.")
    served_name: str | None = Field(None, min_length=1, description="Model name in the OpenAI API. Defaults to the key.")
    params_billion: float = Field(gt=0, le=10000, description="Parameters, in billions.")
    layers: int = Field(ge=1, strict=True, description="Transformer layers.")
    kv_heads: int = Field(ge=1, strict=True, description="Key-value heads (GQA groups).")
    head_dim: int = Field(ge=1, strict=True, description="Head dimension.")
    dtype: Literal["bf16", "fp16", "fp8"] = Field("bf16", description="Weight dtype. Defaults to bf16.")
    max_context: int = Field(ge=1, strict=True, description="Longest sequence served (vLLM --max-model-len).")
    mean_context: int | None = Field(
        None, ge=1, strict=True,
        description="Typical sequence length, used to size replicas for the concurrency target. Defaults to max_context (conservative).",
    )
    concurrent_sequences: int = Field(ge=1, strict=True, description="Sequences served at once across replicas.")
    min_replicas: int = Field(2, ge=1, le=64, strict=True, description="Replicas kept whatever the sizing says, for availability. Defaults to 2.")


class GatewayConfig(_Model):
    """The one inference gateway: a fixed internal VIP and DNS name."""

    pool: DnsLabel = Field("internal", description="Internal pool of the inference cluster. Defaults to internal.")
    vip: Address = Field(description="Fixed address of the gateway in `pool`.")
    hostname: DnsName | None = Field(None, description="DNS name of the serving URL. Defaults to llm.<domain>.")
    tls_secret: DnsLabel = Field(
        "llm-gateway-tls",
        description="kubernetes.io/tls Secret with the gateway's certificate, issued by the site's PKI into "
        "envoy-gateway-system. Defaults to llm-gateway-tls.",
    )


class InferenceConfig(_Model):
    """Online inference: vLLM per model behind one authenticated, rate-limited gateway."""

    cluster: DnsLabel = Field(description="The gpu cluster that serves (role gpu).")
    gpu_memory_utilization: float = Field(0.9, ge=0.5, le=0.98, description="vLLM's share of GPU memory. Defaults to 0.9.")
    reserve_gib: float = Field(2.0, ge=0, le=32, description="Memory per GPU kept for activations and CUDA graphs. Defaults to 2.")
    gateway: GatewayConfig
    models: dict[ModelName, InferenceModelConfig] = Field(min_length=1, description="Served models by name.")
    requests_per_minute: int = Field(600, ge=1, strict=True, description="Default rate limit per team. Defaults to 600.")
    team_requests_per_minute: dict[DnsLabel, int] = Field(default_factory=dict, description="Rate limit per team where it differs from the default.")


# --------------------------------------------------------------------------------------------------
# Training (TrainingPool) and day/night profiles.


class TeamQuota(_Model):
    """A team's guaranteed share of one GPU cluster's training pool, as Kueue quotas."""

    gpus: int = Field(ge=0, strict=True, description="Nominal nvidia.com/gpu quota.")
    cpu: int | None = Field(None, ge=0, strict=True, description="Nominal CPU cores. Defaults to 16 per GPU.")
    memory_gib: int | None = Field(None, ge=0, strict=True, description="Nominal memory. Defaults to 128 GiB per GPU.")
    borrowing_limit_gpus: int | None = Field(
        None, ge=0, strict=True, description="GPUs the team may borrow from the cohort on top. Defaults to no limit."
    )
    lending_limit_gpus: int | None = Field(
        None, ge=0, strict=True, description="GPUs of its quota the team lends to the cohort at most. Defaults to all unused."
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
    manager: DnsLabel | None = Field(None, description="Manager cluster key. Defaults to the compute cluster.")
    workers: list[DnsLabel] = Field(default_factory=list, description="Worker cluster keys (gpu or gpu-train).")


class TrainingConfig(_Model):
    """Kueue on every GPU cluster: team quotas, topology-aware placement, optional MultiKueue."""

    topology_levels: list[str] = Field(
        default_factory=lambda: ["fab.internal/block", "fab.internal/rack", "kubernetes.io/hostname"],
        min_length=1,
        description="Node labels from the widest to the narrowest topology domain, for topology-aware scheduling. "
        "Defaults to fab.internal/block, fab.internal/rack, kubernetes.io/hostname.",
    )
    group_prefix: str = Field(
        "oidc:", description="Prefix the API servers' OIDC authenticator puts on group names. Defaults to oidc:."
    )
    multikueue: MultiKueueConfig = Field(default_factory=MultiKueueConfig, description="MultiKueue dispatch.")
    quotas: dict[DnsLabel, dict[DnsLabel, TeamQuota]] = Field(
        default_factory=dict, description="Team -> GPU cluster -> quota. A team without quota on a cluster gets none there."
    )


class Profile(_Model):
    """A named state of the GPU fleet (for example day and night); only what differs from the base config."""

    description: str = Field("", description="When the profile is used.")
    node_pools: dict[DnsLabel, dict[NodeName, Literal["inference", "training"]]] = Field(
        default_factory=dict, description="GPU cluster -> node -> pool, overriding the nodes' `pool`."
    )
    replicas: dict[ModelName, int] = Field(default_factory=dict, description="vLLM replicas per model, overriding the sizing.")
    quotas: dict[DnsLabel, dict[DnsLabel, TeamQuota]] = Field(
        default_factory=dict, description="Team -> GPU cluster -> quota, overriding `training.quotas`."
    )


# --------------------------------------------------------------------------------------------------
# Compute cluster (ComputeCluster).


class YuniKornQueue(_Model):
    """Guaranteed and maximum resources of a YuniKorn queue."""

    guaranteed_vcores: int = Field(ge=0, strict=True, description="Guaranteed CPU cores.")
    guaranteed_memory_gib: int = Field(ge=0, strict=True, description="Guaranteed memory.")
    max_vcores: int = Field(ge=1, strict=True, description="Maximum CPU cores.")
    max_memory_gib: int = Field(ge=1, strict=True, description="Maximum memory.")


class SparkConfig(_Model):
    """Spark operator with Apache YuniKorn as its batch scheduler."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    batch: YuniKornQueue = Field(description="The batch queue (scheduled Spark jobs).")
    interactive: YuniKornQueue = Field(description="The interactive queue (Spark Connect, notebooks).")


class ServiceToggle(_Model):
    """A compute service that can be switched off."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")


class TrinoConfig(_Model):
    """Trino on Polaris, signing in through Keycloak."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    workers: int = Field(3, ge=1, le=200, strict=True, description="Trino workers. Defaults to 3.")


class StarRocksConfig(_Model):
    """StarRocks: three FE, stateless CN with autoscaling and a local NVMe data cache."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    cn_min_replicas: int = Field(2, ge=1, strict=True, description="Fewest compute nodes. Defaults to 2.")
    cn_max_replicas: int = Field(8, ge=1, strict=True, description="Most compute nodes. Defaults to 8.")
    cache_storage_class: str = Field("local-nvme-cache", min_length=1, description="StorageClass of the CN data cache. Defaults to local-nvme-cache.")
    cache_size_gib: int = Field(500, ge=10, strict=True, description="Data cache per CN. Defaults to 500.")


class JupyterProfile(_Model):
    """A CPU notebook size offered by JupyterHub."""

    description: str = Field("", description="Shown in the spawner.")
    cpu: float = Field(gt=0, le=64, description="CPU limit (and guarantee) in cores.")
    memory_gib: int = Field(ge=1, le=512, strict=True, description="Memory limit (and guarantee).")


class JupyterConfig(_Model):
    """JupyterHub with CPU notebook profiles; GPU notebooks run on the GPU cluster, not here."""

    enabled: Flag = Field(True, description="Deploy it. Defaults to true.")
    profiles: dict[DnsLabel, JupyterProfile] = Field(
        default_factory=lambda: {
            "small": JupyterProfile(description="2 CPU, 8 GiB", cpu=2, memory_gib=8),
            "large": JupyterProfile(description="8 CPU, 64 GiB", cpu=8, memory_gib=64),
        },
        min_length=1, description="Notebook sizes by name. Defaults to small (2 CPU, 8 GiB) and large (8 CPU, 64 GiB).",
    )


class ComputeIngressConfig(_Model):
    """The only entry for outside users: one gateway on an external pool of the compute cluster."""

    pool: DnsLabel = Field("external", description="External pool of the compute cluster. Defaults to external.")
    vip: Address = Field(description="Fixed address of the ingress in `pool`.")
    tls_secret: DnsLabel = Field(
        "compute-ingress-tls",
        description="kubernetes.io/tls Secret in envoy-gateway-system covering every UI host name, issued by the site's PKI. "
        "Defaults to compute-ingress-tls.",
    )


class ComputeConfig(_Model):
    """What runs on the compute cluster; each service can be switched off."""

    batch_nodes: list[NodeName] = Field(
        default_factory=list,
        description="Nodes of the batch pool: labelled by the program; they register with the batch taint (docs/operations.md, \"Node pools\").",
    )
    ingress: ComputeIngressConfig
    spark: SparkConfig
    airflow: ServiceToggle = Field(default_factory=ServiceToggle, description="Apache Airflow.")
    trino: TrinoConfig = Field(default_factory=TrinoConfig, description="Trino.")
    starrocks: StarRocksConfig = Field(default_factory=StarRocksConfig, description="StarRocks.")
    superset: ServiceToggle = Field(default_factory=ServiceToggle, description="Apache Superset.")
    jupyterhub: JupyterConfig = Field(default_factory=JupyterConfig, description="JupyterHub.")


# --------------------------------------------------------------------------------------------------
# Federation between sites (SiteFederation).


class FederationConsumer(_Model):
    """A site that reads this site's gold tables."""

    replicate_gold: Flag = Field(True, description="Copy this site's gold buckets to the consumer. Defaults to true.")
    remote_training_teams: list[DnsLabel] = Field(
        default_factory=list,
        description="Teams whose training may run on the consumer's GPU clusters; only on replicated data, so "
        "replicate_gold must be on. Defaults to none.",
    )


class FederationPeer(_Model):
    """A site whose gold tables this site reads (a Trino catalog) and keeps a replica of."""


class FederationConfig(_Model):
    """Cross-site federation; off while both maps are empty."""

    organization: str | None = Field(
        None, min_length=1,
        description="Pulumi organization of the other sites' stacks (`<organization>/fab-platform/<site>`): the Pulumi "
        "Cloud organization, or `organization` on a self-managed (DIY) backend. Defaults to this stack's own organization.",
    )
    consumers: dict[DnsLabel, FederationConsumer] = Field(default_factory=dict, description="Sites reading this site's gold, by site name.")
    peers: dict[DnsLabel, FederationPeer] = Field(default_factory=dict, description="Sites whose gold this site reads, by site name.")
    linked: list[DnsLabel] = Field(
        default_factory=list,
        description="Federated sites whose stack is deployed and read through a StackReference. Until a site is listed "
        "here only this side is set up (its principal, its replica bucket), so a site deploys before its peers exist; "
        "listing it adds the gold copy job and the Trino catalog that need its outputs. Defaults to none.",
    )
    ranges: dict[DnsLabel, list[Cidr]] = Field(
        default_factory=dict,
        description="Per federated site, the source ranges its traffic arrives from (its clusters' pod and node ranges, "
        "or what its edge translates them to). Each site's default-deny admits exactly these to the S3 and Polaris "
        "endpoints federation uses. Required for every consumer and peer.",
    )

    def sites(self) -> list[str]:
        """Every federated site: consumers and peers."""
        return sorted({*self.consumers, *self.peers})


class SiteConfig(_Model):
    """One fab site: its clusters, how they are connected and which flows may cross between them."""

    name: DnsLabel = Field(description="Site name, for example site-a; prefixes every cluster name.")
    domain: DnsName = Field(description="Internal DNS domain of the site, for example site-a.fab.internal.")
    ca_bundle: str | None = Field(
        None, min_length=1,
        description="PEM file, relative to the project directory, with the CA certificates of the site's PKI that issued "
        "the certificates of its endpoints (AIStor, Keycloak). Every client the program runs trusts it: the MinIO and "
        "Keycloak providers, its own MinIO calls, and the pods that call AIStor (weights sync, gold copy, Postgres "
        "backups). Public certificates only. Defaults to the system's trust store.",
    )
    adopt: AdoptConfig = Field(default_factory=AdoptConfig, description="Objects that exist already and are imported, never created over.")
    check: CheckConfig = Field(default_factory=CheckConfig, description="Inputs of the offline deploy check (`fabctl check`).")
    minio: MinioEndpoint = Field(description="The object store's admin endpoint for the minio provider.")
    keycloak: KeycloakEndpoint = Field(description="The site's Keycloak for the keycloak provider.")
    clusters: dict[DnsLabel, ClusterConfig] = Field(min_length=1, description="Clusters by key (storage, compute, gpu, ...).")
    teams: dict[DnsLabel, Team] = Field(min_length=1, description="Teams by name (yield, fdc, wafermap, ...).")
    identity: IdentityConfig = Field(default_factory=IdentityConfig, description="Keycloak realm objects of the platform.")
    storage: StorageConfig
    gpu_types: dict[DnsLabel, GpuType] = Field(
        default_factory=dict, description="GPU models by key, added to (or replacing) the built-in h100 and h200."
    )
    gpu: dict[DnsLabel, GpuClusterConfig] = Field(description="GPU nodes and operators per gpu or gpu-train cluster key.")
    inference: InferenceConfig
    training: TrainingConfig = Field(default_factory=TrainingConfig, description="Kueue quotas and MultiKueue.")
    compute: ComputeConfig
    federation: FederationConfig = Field(default_factory=FederationConfig, description="Cross-site federation. Defaults to off.")
    profiles: dict[DnsLabel, Profile] = Field(default_factory=dict, description="Named fleet profiles (day, night, ...).")
    active_profile: DnsLabel | None = Field(
        None, description="The profile in force; switching is a config change and `pulumi up`. Defaults to the base config."
    )
    flows: dict[DnsLabel, Flow] | None = Field(
        None,
        description="The cross-cluster flow table by name. Defaults to the design's four flows: S3 and Polaris REST "
        "from compute and GPU clusters to storage, the inference gateway from compute to gpu clusters, and the "
        "MultiKueue manager on compute to every GPU cluster's API server.",
    )

    def ca_bundle_pem(self) -> str | None:
        """The site CA bundle's certificates (checked by a config rule)."""
        return _read_ca_bundle(self.ca_bundle) if self.ca_bundle else None

    def cluster_name(self, key: str) -> str:
        """Cilium cluster name and provider name of a cluster: `<site>-<key>`."""
        return f"{self.name}-{key}"

    def kubeconfig_context(self, key: str) -> str:
        return self.clusters[key].kubeconfig_context or self.cluster_name(key)

    def keys_with_role(self, *roles: str) -> list[str]:
        return sorted(key for key, cluster in self.clusters.items() if cluster.role in roles)

    def all_gpu_types(self) -> dict[str, GpuType]:
        return {**DEFAULT_GPU_TYPES, **self.gpu_types}

    def profile(self, name: str | None = ...) -> Profile:  # type: ignore[assignment]
        """A profile by name; the active one by default, and an empty profile for the base config."""
        name = self.active_profile if name is ... else name
        # An unknown name is reported by its own rule; the other rules then judge the base config.
        return self.profiles.get(name, Profile()) if name else Profile()

    def node_pool(self, cluster: str, node: str, profile: str | None = ...) -> str:  # type: ignore[assignment]
        """The pool a node serves under a profile (the active one by default)."""
        override = self.profile(profile).node_pools.get(cluster, {}).get(node)
        return override or self.gpu[cluster].nodes[node].pool

    def pool_nodes(self, cluster: str, pool: str, profile: str | None = ...) -> dict[str, GpuNode]:  # type: ignore[assignment]
        """Nodes of a GPU cluster that serve `pool` (inference or training) under a profile."""
        spec = self.gpu.get(cluster)
        if spec is None:
            return {}
        return {name: node for name, node in sorted(spec.nodes.items()) if self.node_pool(cluster, name, profile) == pool}

    def team_quotas(self, profile: str | None = ...) -> dict[str, dict[str, TeamQuota]]:  # type: ignore[assignment]
        """Team -> GPU cluster -> quota under a profile."""
        merged = {team: dict(clusters) for team, clusters in self.training.quotas.items()}
        for team, clusters in self.profile(profile).quotas.items():
            merged.setdefault(team, {}).update(clusters)
        return {team: dict(sorted(clusters.items())) for team, clusters in sorted(merged.items())}

    def kueue_clusters(self) -> list[str]:
        """Clusters running Kueue: every GPU cluster, and the MultiKueue manager when enabled."""
        return sorted({*self.keys_with_role(*GPU_ROLES), *([self.multikueue_manager()] if self.training.multikueue.enabled else [])})

    def multikueue_manager(self) -> str:
        (compute,) = self.keys_with_role("compute")
        return self.training.multikueue.manager or compute

    def model_capacity(self, profile: str | None = ...) -> dict[str, Any]:  # type: ignore[assignment]
        """GPU sizing of every served model (components.capacity); raises CapacityError when one cannot be served."""
        from components import capacity

        inference = self.inference
        nodes = self.pool_nodes(inference.cluster, "inference", profile)
        replicas = self.profile(profile).replicas
        first = next(iter(nodes.values()))
        gpu_type = self.all_gpu_types()[first.gpu_type]
        gpu = capacity.GpuType(name=first.gpu_type.upper(), memory_mib=gpu_type.memory_mib)
        sized = {}
        for name, model in sorted(inference.models.items()):
            model_profile = capacity.ModelProfile(
                name=name, params_billion=model.params_billion, layers=model.layers, kv_heads=model.kv_heads,
                head_dim=model.head_dim, dtype=model.dtype, max_context=model.max_context,
                mean_context=model.mean_context, concurrent_sequences=model.concurrent_sequences,
            )
            size = capacity.size_model(
                model_profile, gpu, first.gpus, inference.gpu_memory_utilization, inference.reserve_gib, model.min_replicas
            )
            sized[name] = dataclasses.replace(size, replicas=replicas[name]) if name in replicas else size
        capacity.check_pool(list(sized.values()), sum(n.gpus for n in nodes.values()), f"{inference.cluster}/inference")
        return sized

    def flow_table(self) -> dict[str, Flow]:
        """The configured flows, or the design's defaults when the stack sets none.

        With MultiKueue on, the manager-to-worker API flow is part of the table even where the stack's
        own table leaves it out.
        """
        table = dict(self.flows) if self.flows is not None else default_flows(self)
        if self.training.multikueue.enabled and MULTIKUEUE_FLOW not in table:
            table[MULTIKUEUE_FLOW] = multikueue_flow(self)
        for name, flow in federation_flows(self).items():
            table.setdefault(name, flow)
        if INGRESS_FLOW not in table:
            table[INGRESS_FLOW] = Flow(
                description="Outside users reach the UIs through the compute cluster's ingress, the only entry into the site.",
                sources=[WORLD], to=self.keys_with_role("compute"), port=443, target_port=10443,
                to_namespace="envoy-gateway-system", to_labels={"app.kubernetes.io/name": "envoy"},
            )
        return table

    @model_validator(mode="after")
    def _site_rules(self) -> SiteConfig:
        problems = [
            *_role_problems(self),
            *_cluster_problems(self),
            *_overlap_problems(self),
            *_flow_problems(self),
            *_storage_problems(self),
            *_gpu_problems(self),
            *_training_problems(self),
            *_compute_problems(self),
            *_federation_problems(self),
            *_vip_problems(self),
            *_adoption_problems(self),
            *_check_problems(self),
        ]
        if problems:
            raise SiteRuleError(problems)
        return self


def default_flows(site: SiteConfig) -> dict[str, Flow]:
    """The design's four flows for the site's clusters (DESIGN section 2, network rules)."""
    storage = site.keys_with_role("storage")
    compute = site.keys_with_role("compute")
    gpus = site.keys_with_role(*GPU_ROLES)
    store, polaris = site.storage.object_store, site.storage.polaris
    return {
        "s3": Flow(
            description="Compute and GPU pods read and write AIStor over its internal S3 endpoint.",
            sources=compute + gpus, to=storage, port=store.s3_port, to_namespace=store.namespace,
        ),
        "polaris": Flow(
            description="Compute and GPU pods use the Polaris Iceberg REST catalog.",
            sources=compute + gpus, to=storage, port=polaris.port, to_namespace=polaris.namespace,
        ),
        "inference": Flow(
            # Envoy Gateway runs the proxy unprivileged and maps listener ports below 1024 to port + 10000.
            description="Compute apps call the inference gateway (OpenAI-compatible, JWT).",
            sources=compute, to=site.keys_with_role("gpu"), port=443, target_port=10443,
            to_namespace="envoy-gateway-system", to_labels={"app.kubernetes.io/name": "envoy"},
        ),
        MULTIKUEUE_FLOW: Flow(
            description="The MultiKueue manager on compute dispatches workloads to the GPU clusters' API servers.",
            sources=compute, to=gpus, port=6443, target="kube-apiserver",
            from_namespace="kueue-system", from_labels={"control-plane": "controller-manager"},
        ),
    }


MULTIKUEUE_FLOW = "multikueue"
INGRESS_FLOW = "compute-ingress"


def federation_flows(site: SiteConfig) -> dict[str, Flow]:
    """What other sites reach here, by their declared ranges: S3 (a consumer's Trino reads gold with vended
    credentials; a peer's copy job writes its replica bucket) and Polaris REST (a consumer's Trino catalog)."""
    federation, store, polaris = site.federation, site.storage.object_store, site.storage.polaris
    storage = site.keys_with_role("storage")
    flows: dict[str, Flow] = {}
    for other in federation.sites():
        ranges = federation.ranges.get(other, [])
        if not ranges:
            continue  # refused by its own rule
        flows[f"federation-{other}-s3"] = Flow(
            description=f"Federated site {other}: " + " and ".join(
                part for part, on in (("its Trino reads our gold", other in federation.consumers),
                                      ("its copy job writes its replica bucket", other in federation.peers)) if on
            ) + " over the internal S3 endpoint.",
            from_cidrs=[str(r) for r in ranges], to=storage, port=store.s3_port, to_namespace=store.namespace, to_labels=store.s3_pod_labels,
        )
        if other in federation.consumers:
            flows[f"federation-{other}-polaris"] = Flow(
                description=f"Federated site {other}: its Trino catalog on our Polaris (a gold-only principal).",
                from_cidrs=[str(r) for r in ranges], to=storage, port=polaris.port, to_namespace=polaris.namespace,
            )
    return flows


def multikueue_flow(site: SiteConfig) -> Flow:
    """The manager's Kueue controller to every worker's API server."""
    workers = sorted(site.training.multikueue.workers)
    ports = {site.clusters[w].api_server_port for w in workers if w in site.clusters} or {6443}
    return Flow(
        description="The MultiKueue manager dispatches workloads to its workers' API servers.",
        sources=[site.multikueue_manager()], to=workers, port=min(ports), target="kube-apiserver",
        from_namespace="kueue-system", from_labels={"control-plane": "controller-manager"},
    )


# --------------------------------------------------------------------------------------------------
# Cross-field rules. Each yields (key path, message); the message names the value and the fix.

Problem = tuple[tuple[str | int, ...], str]


class SiteRuleError(ValueError):
    """Raised by the model when cross-field rules fail; carries every problem with its key path."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(msg for _, msg in problems))
        self.problems = problems


def _role_problems(site: SiteConfig) -> Iterator[Problem]:
    for role in ("storage", "compute"):
        keys = site.keys_with_role(role)
        if len(keys) != 1:
            found = ", ".join(keys) if keys else "none"
            yield ("clusters",), f"a site needs exactly one {role} cluster, found {found}"
    if not site.keys_with_role("gpu"):
        yield ("clusters",), "a site needs at least one cluster with role gpu (inference runs there), found none"


def _cluster_problems(site: SiteConfig) -> Iterator[Problem]:
    ids: dict[int, str] = {}
    asns: dict[int, str] = {}
    for key, cluster in site.clusters.items():
        name = site.cluster_name(key)
        if len(name) > CILIUM_CLUSTER_NAME_MAX:
            yield ("clusters", key), (
                f"cluster name {name!r} (site name + '-' + key) has {len(name)} characters; Cilium allows at most "
                f"{CILIUM_CLUSTER_NAME_MAX}: use a shorter key"
            )
        if cluster.cluster_id in ids:
            yield ("clusters", key, "cluster_id"), (
                f"{cluster.cluster_id} is already the cluster_id of clusters.{ids[cluster.cluster_id]}; "
                "every cluster of a ClusterMesh needs its own id 1-255"
            )
        ids.setdefault(cluster.cluster_id, key)
        if cluster.bgp_asn in asns:
            yield ("clusters", key, "bgp_asn"), (
                f"{cluster.bgp_asn} is already the bgp_asn of clusters.{asns[cluster.bgp_asn]}; "
                "give every cluster its own ASN so that routes between clusters are not dropped as loops"
            )
        asns.setdefault(cluster.bgp_asn, key)
        yield from _pool_problems(key, cluster)
        if cluster.role in GPU_ROLES:
            for peer_name, peer in cluster.bgp_peers.items():
                if peer.kind == "public":
                    yield ("clusters", key, "bgp_peers", peer_name, "kind"), (
                        f"'public' is not allowed on {cluster.role} cluster {key}: GPU clusters peer only with "
                        "private ToRs; use kind 'private'"
                    )


def _pool_problems(key: str, cluster: ClusterConfig) -> Iterator[Problem]:
    for pool_name, pool in cluster.lb_pools.items():
        path = ("clusters", key, "lb_pools", pool_name)
        if pool.visibility == "external" and cluster.role in GPU_ROLES:
            yield (*path, "visibility"), (
                f"'external' is not allowed on {cluster.role} cluster {key}: nothing on a GPU cluster is exposed "
                "outside the site; use visibility 'internal' with an RFC1918 range"
            )
        if pool.visibility == "internal":
            for i, cidr in enumerate(pool.cidrs):
                if not any(cidr.subnet_of(block) for block in RFC1918):
                    yield (*path, "cidrs", i), (
                        f"{cidr} is not in RFC1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) but the pool is "
                        "internal; use a private range or make the pool external"
                    )
        if pool.visibility == "external" and cluster.role not in GPU_ROLES and not any(p.kind == "public" for p in cluster.bgp_peers.values()):
            yield (*path, "visibility"), (
                f"'external' pool {pool_name!r} would never be advertised: clusters.{key} has no bgp peer of kind "
                "'public'; add one or make the pool internal"
            )
    mesh_path = ("clusters", key, "clustermesh_pool")
    mesh_pool = cluster.lb_pools.get(cluster.clustermesh_pool)
    if mesh_pool is None:
        yield mesh_path, (
            f"{cluster.clustermesh_pool!r} is not a pool of clusters.{key}; pools: {', '.join(sorted(cluster.lb_pools))}"
        )
    elif mesh_pool.visibility != "internal":
        yield mesh_path, f"{cluster.clustermesh_pool!r} is an external pool; the ClusterMesh API server needs an internal one"
    elif not any(cluster.clustermesh_vip in cidr for cidr in mesh_pool.cidrs):
        yield ("clusters", key, "clustermesh_vip"), (
            f"{cluster.clustermesh_vip} is not in pool {cluster.clustermesh_pool!r} "
            f"({', '.join(map(str, mesh_pool.cidrs))}); pick an address of that pool"
        )


def _site_ranges(site: SiteConfig) -> Iterator[tuple[tuple[str | int, ...], IPv4Network]]:
    for key, cluster in site.clusters.items():
        yield ("clusters", key, "pod_cidr"), cluster.pod_cidr
        yield ("clusters", key, "node_cidr"), cluster.node_cidr
        for pool_name, pool in cluster.lb_pools.items():
            for i, cidr in enumerate(pool.cidrs):
                yield ("clusters", key, "lb_pools", pool_name, "cidrs", i), cidr
    for key, spec in site.gpu.items():
        if spec.infiniband.ipoib_range is not None:
            yield ("gpu", key, "infiniband", "ipoib_range"), spec.infiniband.ipoib_range


def _overlap_problems(site: SiteConfig) -> Iterator[Problem]:
    for (path_a, net_a), (path_b, net_b) in combinations(list(_site_ranges(site)), 2):
        if net_a.overlaps(net_b):
            yield path_b, (
                f"{net_b} overlaps {format_path(path_a)} ({net_a}); every pod, node and pool range of a site "
                "must be disjoint"
            )


def _flow_problems(site: SiteConfig) -> Iterator[Problem]:
    known = ", ".join(sorted(site.clusters))
    for name, flow in (site.flows or {}).items():
        path = ("flows", name)
        if not flow.sources and not flow.from_cidrs:
            yield (*path, "from"), "is empty and so is from_cidrs: name the source clusters or ranges"
        if flow.from_cidrs and flow.target == "kube-apiserver":
            yield (*path, "from_cidrs"), "is not allowed on a kube-apiserver flow; name the client clusters"
        for i, cidr in enumerate(flow.from_cidrs):
            for key, cluster in site.clusters.items():
                if cidr.overlaps(cluster.pod_cidr) or cidr.overlaps(cluster.node_cidr):
                    yield (*path, "from_cidrs", i), (
                        f"{cidr} overlaps clusters.{key}; from_cidrs are for addresses outside the site's clusters, "
                        "which are named by key in from"
                    )
        for i, source in enumerate(flow.sources):
            if source != WORLD and source not in site.clusters:
                yield (*path, "from", i), f"{source!r} is not a cluster of this site; known clusters: {known}, or {WORLD}"
        for i, dest in enumerate(flow.to):
            if dest not in site.clusters:
                yield (*path, "to", i), f"{dest!r} is not a cluster of this site; known clusters: {known}"
            elif dest in flow.sources:
                yield (*path, "to", i), f"{dest!r} is also a source; a flow crosses clusters, traffic inside a cluster is not a flow"
            elif (WORLD in flow.sources or flow.from_cidrs) and site.clusters[dest].role in GPU_ROLES:
                origin = WORLD if WORLD in flow.sources else "from_cidrs"
                yield (*path, "to", i), (
                    f"{dest!r} is a GPU cluster and the flow comes from {origin}; nothing on a GPU cluster is exposed "
                    "outside the site: route outside users through the compute cluster's ingress"
                )
        if flow.target == "pods" and flow.to_namespace is None:
            yield (*path, "to_namespace"), "is required for a pods flow: name the namespace of the destination pods"
        if flow.target == "kube-apiserver":
            for i, dest in enumerate(flow.to):
                cluster = site.clusters.get(dest)
                if cluster is not None and cluster.api_server_port != flow.pod_port:
                    yield (*path, "port"), (
                        f"{flow.pod_port} is not the API server port of clusters.{dest} ({cluster.api_server_port}); "
                        "a kube-apiserver flow uses the destination's api_server_port"
                    )
            if flow.from_namespace is None:
                yield (*path, "from_namespace"), "is required for a kube-apiserver flow: name the namespace of the client pods"
            if WORLD in flow.sources:
                yield (*path, "from"), f"{WORLD} cannot reach a cluster's API server through a flow; name the client clusters"
            if flow.to_namespace is not None or flow.to_labels:
                yield (*path, "to_namespace"), "is not used by a kube-apiserver flow: the destination is the API server VIP"


def _pool_vip_problems(site: SiteConfig, path: tuple[str | int, ...], pool_name: str | None, vip: Any, visibility: str) -> Iterator[Problem]:
    """A VIP of the storage cluster must lie in a pool of the right visibility."""
    storage_keys = site.keys_with_role("storage")
    if len(storage_keys) != 1 or pool_name is None:
        return
    cluster = site.clusters[storage_keys[0]]
    pool = cluster.lb_pools.get(pool_name)
    pool_path = (*path[:-1], path[-1].replace("vip", "pool"))
    if pool is None:
        yield pool_path, f"{pool_name!r} is not a pool of the storage cluster; pools: {', '.join(sorted(cluster.lb_pools))}"
    elif pool.visibility != visibility:
        yield pool_path, f"{pool_name!r} is an {pool.visibility} pool; this endpoint needs an {visibility} one"
    elif vip is None:
        yield path, f"is required with {pool_path[-1]}: the endpoint's address is a contract"
    elif not any(vip in cidr for cidr in pool.cidrs):
        yield path, f"{vip} is not in pool {pool_name!r} ({', '.join(map(str, pool.cidrs))}); pick an address of that pool"


def _storage_problems(site: SiteConfig) -> Iterator[Problem]:
    storage = site.storage
    store = storage.object_store
    if store.table_catalog:
        yield ("storage", "object_store", "table_catalog"), (
            "true is not allowed: Polaris is the only Iceberg catalog authority, so AIStor's table catalog stays off"
        )
    for data_class in CONTRACT_CLASSES:
        names = sorted(n for n, b in storage.buckets.items() if b.data_class == data_class)
        if len(names) != 1:
            yield ("storage", "buckets"), (
                f"a site needs exactly one bucket of class {data_class}, found {', '.join(names) if names else 'none'}"
            )
    for name, bucket in storage.buckets.items():
        path = ("storage", "buckets", name)
        if bucket.retention_days is not None and bucket.data_class in NO_EXPIRY_CLASSES:
            yield (*path, "retention_days"), (
                f"is not allowed on class {bucket.data_class}: "
                + ("Iceberg removes table files through snapshot expiry; lifecycle expiry would corrupt tables"
                   if bucket.data_class == "warehouse" else "its objects are kept until deleted on purpose")
            )
        if bucket.noncurrent_expiry_days is not None and not bucket.versioned:
            yield (*path, "noncurrent_expiry_days"), (
                f"is only for versioned buckets (classes {', '.join(sorted(VERSIONED_CLASSES))}); class {bucket.data_class} is not versioned"
            )
    if site.compute.starrocks.enabled and not any(b.data_class == "olap" for b in storage.buckets.values()):
        yield ("storage", "buckets"), "StarRocks is enabled but no bucket has class olap: its shared-data storage needs one"
    backup = storage.polaris.postgres.backup_bucket
    if backup not in storage.buckets:
        yield ("storage", "polaris", "postgres", "backup_bucket"), f"{backup!r} is not a bucket of storage.buckets"
    elif storage.buckets[backup].data_class != "backups":
        yield ("storage", "polaris", "postgres", "backup_bucket"), (
            f"{backup!r} has class {storage.buckets[backup].data_class}; Postgres backups go to a bucket of class backups"
        )
    s3 = storage.s3
    yield from _pool_vip_problems(site, ("storage", "s3", "internal_vip"), s3.internal_pool, s3.internal_vip, "internal")
    if s3.external_pool is None and s3.external_vip is not None:
        yield ("storage", "s3", "external_pool"), "is required with external_vip: name the external pool that holds it"
    yield from _pool_vip_problems(site, ("storage", "s3", "external_vip"), s3.external_pool, s3.external_vip, "external")
    polaris = storage.polaris
    yield from _pool_vip_problems(site, ("storage", "polaris", "vip"), polaris.pool, polaris.vip, "internal")


def _gpu_problems(site: SiteConfig) -> Iterator[Problem]:
    gpu_keys = set(site.keys_with_role(*GPU_ROLES))
    for key in sorted(set(site.gpu) - gpu_keys):
        role = site.clusters[key].role if key in site.clusters else None
        yield ("gpu", key), (
            f"{key!r} is {'a ' + role + ' cluster' if role else 'not a cluster of this site'}; gpu sections are for "
            f"gpu and gpu-train clusters: {', '.join(sorted(gpu_keys))}"
        )
    for key in sorted(gpu_keys - set(site.gpu)):
        yield ("gpu",), f"cluster {key!r} has role {site.clusters[key].role} but no gpu section: list its GPU nodes"
    types = site.all_gpu_types()
    for key, spec in sorted(site.gpu.items()):
        for node_name, node in spec.nodes.items():
            if node.gpu_type not in types:
                yield ("gpu", key, "nodes", node_name, "gpu_type"), (
                    f"{node.gpu_type!r} is not a GPU type; known: {', '.join(sorted(types))} (add it under gpu_types)"
                )
        for i, node_name in enumerate(spec.system_nodes):
            if node_name in spec.nodes:
                yield ("gpu", key, "system_nodes", i), (
                    f"{node_name!r} is also a GPU node of gpu.{key}.nodes; system nodes are the untainted nodes without GPUs"
                )
        if key in site.clusters and site.clusters[key].role == "gpu-train":
            for node_name, node in spec.nodes.items():
                if node.pool == "inference":
                    yield ("gpu", key, "nodes", node_name, "pool"), (
                        f"'inference' is not allowed on gpu-train cluster {key}: it trains only; serve from a gpu cluster"
                    )
        ib = spec.infiniband
        if ib.inference_weights_over_ib and ib.ipoib_range is None and key == site.inference.cluster:
            yield ("gpu", key, "infiniband", "ipoib_range"), (
                "is required while inference_weights_over_ib is true: give the IPoIB network an address range"
            )
    yield from _inference_problems(site)


def _inference_problems(site: SiteConfig) -> Iterator[Problem]:
    from components.capacity import CapacityError

    inference = site.inference
    path = ("inference",)
    cluster = site.clusters.get(inference.cluster)
    if cluster is None or cluster.role != "gpu":
        yield (*path, "cluster"), (
            f"{inference.cluster!r} is not a gpu cluster of this site; gpu clusters: {', '.join(site.keys_with_role('gpu'))}"
        )
        return
    for team in sorted(set(inference.team_requests_per_minute) - set(site.teams)):
        yield (*path, "team_requests_per_minute", team), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
    bad_models = False
    for name, model in sorted(inference.models.items()):
        if model.mean_context is not None and model.mean_context > model.max_context:
            bad_models = True
            yield (*path, "models", name, "mean_context"), f"{model.mean_context} is longer than max_context {model.max_context}"
    gateway = inference.gateway
    pool = cluster.lb_pools.get(gateway.pool)
    if pool is None or pool.visibility != "internal":
        yield (*path, "gateway", "pool"), f"{gateway.pool!r} is not an internal pool of clusters.{inference.cluster}"
    elif not any(gateway.vip in cidr for cidr in pool.cidrs):
        yield (*path, "gateway", "vip"), (
            f"{gateway.vip} is not in pool {gateway.pool!r} ({', '.join(map(str, pool.cidrs))}); pick an address of that pool"
        )
    nodes = site.pool_nodes(inference.cluster, "inference")
    if any(n.gpu_type not in site.all_gpu_types() for n in nodes.values()):
        return  # reported on the node itself
    shapes = {(n.gpu_type, n.gpus) for n in nodes.values()}
    if not nodes:
        yield ("gpu", inference.cluster, "nodes"), "has no node in pool inference: the models need somewhere to run"
        return
    if len(shapes) > 1:
        yield ("gpu", inference.cluster, "nodes"), (
            "inference nodes must share one GPU type and count, found "
            + ", ".join(f"{t} x{g}" for t, g in sorted(shapes))
        )
        return
    if bad_models or any(n.gpu_type not in site.all_gpu_types() for n in nodes.values()):
        return
    for profile in [None, *sorted(p for p in site.profiles if not _profile_problems_exist(site, p))]:
        where = (*path, "models") if profile is None else ("profiles", profile)
        suffix = "" if profile is None else f" (profile {profile})"
        try:
            site.model_capacity(profile)
        except CapacityError as exc:
            yield where, f"{exc}{suffix}"
        except StopIteration:
            yield ("profiles", profile or "", "node_pools"), f"leaves no inference node on {inference.cluster}{suffix}"


def _profile_problems_exist(site: SiteConfig, profile: str) -> bool:
    return any(True for _ in _profile_problems(site, profile))


def _profile_problems(site: SiteConfig, name: str) -> Iterator[Problem]:
    profile = site.profiles[name]
    path = ("profiles", name)
    for cluster, nodes in sorted(profile.node_pools.items()):
        if cluster not in site.gpu:
            yield (*path, "node_pools", cluster), f"{cluster!r} is not a GPU cluster with a gpu section; known: {', '.join(sorted(site.gpu))}"
            continue
        for node, pool in sorted(nodes.items()):
            if node not in site.gpu[cluster].nodes:
                yield (*path, "node_pools", cluster, node), f"{node!r} is not a node of gpu.{cluster}; nodes: {', '.join(sorted(site.gpu[cluster].nodes))}"
            elif pool == "inference" and site.clusters.get(cluster) and site.clusters[cluster].role == "gpu-train":
                yield (*path, "node_pools", cluster, node), f"'inference' is not allowed on gpu-train cluster {cluster}: it trains only"
    for model, replicas in sorted(profile.replicas.items()):
        if model not in site.inference.models:
            yield (*path, "replicas", model), f"{model!r} is not a served model; models: {', '.join(sorted(site.inference.models))}"
        elif replicas < 1:
            yield (*path, "replicas", model), f"{replicas} replicas; a served model keeps at least one"
    yield from _quota_key_problems(site, profile.quotas, (*path, "quotas"))


def _quota_key_problems(site: SiteConfig, quotas: dict[str, dict[str, TeamQuota]], path: tuple[str | int, ...]) -> Iterator[Problem]:
    for team, clusters in sorted(quotas.items()):
        if team not in site.teams:
            yield (*path, team), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
        for cluster in sorted(clusters):
            if cluster not in site.gpu:
                yield (*path, team, cluster), f"{cluster!r} is not a GPU cluster with a gpu section; known: {', '.join(sorted(site.gpu))}"


def _training_problems(site: SiteConfig) -> Iterator[Problem]:
    training = site.training
    if site.active_profile is not None and site.active_profile not in site.profiles:
        known = ", ".join(sorted(site.profiles)) or "none"
        yield ("active_profile",), f"{site.active_profile!r} is not a profile; profiles: {known}"
    for name in sorted(site.profiles):
        yield from _profile_problems(site, name)
    key_problems = list(_quota_key_problems(site, training.quotas, ("training", "quotas")))
    yield from key_problems
    mk = training.multikueue
    if mk.enabled:
        manager = mk.manager or (site.keys_with_role("compute") or [None])[0]
        if not mk.workers:
            yield ("training", "multikueue", "workers"), "is empty: MultiKueue needs at least one GPU worker cluster"
        for i, worker in enumerate(mk.workers):
            if worker == manager:
                yield ("training", "multikueue", "workers", i), (
                    f"{worker!r} is the MultiKueue manager; a manager is never its own worker"
                )
            elif worker not in site.clusters or site.clusters[worker].role not in GPU_ROLES:
                yield ("training", "multikueue", "workers", i), (
                    f"{worker!r} is not a gpu or gpu-train cluster; workers: {', '.join(site.keys_with_role(*GPU_ROLES))}"
                )
        if mk.manager is not None and mk.manager not in site.clusters:
            yield ("training", "multikueue", "manager"), f"{mk.manager!r} is not a cluster of this site"
        flow = (site.flows or {}).get(MULTIKUEUE_FLOW)
        if flow is not None:
            workers = {w for w in mk.workers if w != manager and w in site.clusters and site.clusters[w].role in GPU_ROLES}
            missing = sorted(workers - set(flow.to))
            if missing or flow.target != "kube-apiserver" or manager not in flow.sources:
                yield ("flows", MULTIKUEUE_FLOW), (
                    f"must be a kube-apiserver flow from {manager} to every MultiKueue worker; "
                    f"{'missing: ' + ', '.join(missing) if missing else 'fix its target or sources'}"
                )
    types = site.all_gpu_types()
    unknown_types = any(n.gpu_type not in types for spec in site.gpu.values() for n in spec.nodes.values())
    if key_problems or unknown_types or any(_profile_problems_exist(site, p) for p in site.profiles):
        return
    for profile in [None, *sorted(site.profiles)]:
        yield from _quota_capacity_problems(site, profile)


def _quota_capacity_problems(site: SiteConfig, profile: str | None) -> Iterator[Problem]:
    """Nominal GPU quotas must fit the training pool of each cluster; borrowing only moves unused quota around."""
    quotas = site.team_quotas(profile)
    suffix = "" if profile is None else f" (profile {profile})"
    where = ("training", "quotas") if profile is None else ("profiles", profile, "quotas")
    for cluster in sorted(site.gpu):
        nodes = site.pool_nodes(cluster, "training", profile)
        shapes = {n.gpu_type for n in nodes.values()}
        if len(shapes) > 1:
            yield ("gpu", cluster, "nodes"), f"training nodes must share one GPU type, found {', '.join(sorted(shapes))}{suffix}"
            continue
        pool_gpus = sum(n.gpus for n in nodes.values())
        teams = {team: q[cluster].gpus for team, q in quotas.items() if cluster in q and q[cluster].gpus}
        total = sum(teams.values())
        if total > pool_gpus:
            detail = ", ".join(f"{team} {gpus}" for team, gpus in sorted(teams.items()))
            yield where, (
                f"teams' GPU quotas on {cluster} add up to {total} ({detail}) but its training pool has {pool_gpus} "
                f"GPUs{suffix}; lower nominal quotas and let teams borrow instead"
            )


def _compute_problems(site: SiteConfig) -> Iterator[Problem]:
    compute = site.keys_with_role("compute")
    if len(compute) != 1:
        return
    cluster = site.clusters[compute[0]]
    ingress = site.compute.ingress
    pool = cluster.lb_pools.get(ingress.pool)
    if pool is None or pool.visibility != "external":
        yield ("compute", "ingress", "pool"), f"{ingress.pool!r} is not an external pool of clusters.{compute[0]}"
    elif not any(ingress.vip in cidr for cidr in pool.cidrs):
        yield ("compute", "ingress", "vip"), (
            f"{ingress.vip} is not in pool {ingress.pool!r} ({', '.join(map(str, pool.cidrs))}); pick an address of that pool"
        )
    starrocks = site.compute.starrocks
    if starrocks.cn_min_replicas > starrocks.cn_max_replicas:
        yield ("compute", "starrocks", "cn_min_replicas"), (
            f"{starrocks.cn_min_replicas} is more than cn_max_replicas {starrocks.cn_max_replicas}"
        )


def _federation_problems(site: SiteConfig) -> Iterator[Problem]:
    federation = site.federation
    for role, sites in (("consumers", federation.consumers), ("peers", federation.peers)):
        if site.name in sites:
            yield ("federation", role, site.name), f"{site.name!r} is this site; a site does not federate with itself"
    others = ", ".join(federation.sites()) or "none"
    for i, other in enumerate(federation.linked):
        if other in federation.linked[:i]:
            yield ("federation", "linked", i), f"{other!r} is listed twice"
        elif other not in federation.sites():
            yield ("federation", "linked", i), f"{other!r} is neither a consumer nor a peer; federated sites: {others}"
    for other in sorted(federation.ranges):
        if other not in federation.sites():
            yield ("federation", "ranges", other), f"{other!r} is neither a consumer nor a peer; federated sites: {others}"
    for other in federation.sites():
        if other != site.name and not federation.ranges.get(other):
            yield ("federation", "ranges"), (
                f"has no ranges for {other!r}: its traffic arrives from outside this site's clusters and is denied "
                "unless its source ranges are declared"
            )
    for other, ranges in sorted(federation.ranges.items()):
        for i, cidr in enumerate(ranges):
            for path, own in _site_ranges(site):
                if cidr.overlaps(own):
                    yield ("federation", "ranges", other, i), f"{cidr} overlaps {format_path(path)} ({own}) of this site"
    for name, consumer in sorted(federation.consumers.items()):
        for i, team in enumerate(consumer.remote_training_teams):
            if team not in site.teams:
                yield ("federation", "consumers", name, "remote_training_teams", i), f"{team!r} is not a team; teams: {', '.join(sorted(site.teams))}"
            elif not consumer.replicate_gold:
                yield ("federation", "consumers", name, "remote_training_teams", i), (
                    f"team {team!r} cannot train on {name}'s GPUs: no data is replicated there; remote GPUs are used only "
                    "for replicated (gold) data, so set replicate_gold"
                )


PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----")


def _read_ca_bundle(path: str) -> str:
    """The certificates of a PEM file (paths relative to the working directory: the project's, under Pulumi and fabctl)."""
    from pathlib import Path

    text = Path(path).read_text(encoding="ascii")
    return "\n".join(PEM_CERTIFICATE.findall(text)) + "\n"


def _adoption_problems(site: SiteConfig) -> Iterator[Problem]:
    adopt = site.adopt
    if site.ca_bundle is not None:
        try:
            if not _read_ca_bundle(site.ca_bundle).strip():
                yield ("ca_bundle",), f"{site.ca_bundle!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        except OSError as exc:
            yield ("ca_bundle",), f"{site.ca_bundle!r} cannot be read ({exc.strerror or exc}); paths are relative to the project directory"
        except UnicodeDecodeError:
            yield ("ca_bundle",), f"{site.ca_bundle!r} is not a PEM file (PEM is ASCII text)"
    declared = adopt.declared()
    for i, (path, claim) in enumerate(declared):
        if claim in [c for _, c in declared[:i]]:
            yield path, f"{claim[-1]!r} is listed twice"
    replicas = {replica_bucket(site.name, peer) for peer in site.federation.peers}
    for i, bucket in enumerate(adopt.buckets):
        if bucket not in site.storage.buckets and bucket not in replicas:
            yield ("adopt", "buckets", i), f"{bucket!r} is not a bucket of storage.buckets or a federation replica bucket"
    for field in ("minio_users", "minio_policies"):
        for i, name in enumerate(getattr(adopt, field)):
            if not name.startswith("fab-"):
                yield ("adopt", field, i), f"{name!r} is not a platform name: the platform's MinIO users and policies are fab-<engine> and fab-replica-<site>"
    if adopt.realm and not site.identity.create_realm:
        yield ("adopt", "realm"), "true needs identity.create_realm: true; a realm the platform does not manage is only referenced"
    for field in ("namespaces", "helm_releases"):
        for cluster in sorted(getattr(adopt, field)):
            if cluster not in site.clusters:
                yield ("adopt", field, cluster), f"{cluster!r} is not a cluster of this site; clusters: {', '.join(sorted(site.clusters))}"
    store = site.storage.object_store
    for key in site.keys_with_role("storage"):
        if site.clusters[key].cilium.managed and not store.install and CILIUM_RELEASE not in adopt.helm_releases.get(key, []):
            yield ("clusters", key, "cilium", "managed"), (
                f"true (the default) would install Cilium over the CNI of a running cluster (storage.object_store.install "
                f"is false: its AIStor is adopted); adopt its Cilium release with adopt.helm_releases.{key}: "
                f"[{CILIUM_RELEASE}], or set managed: false where Cilium is installed by other means"
            )


def _check_problems(site: SiteConfig) -> Iterator[Problem]:
    clusters = ", ".join(sorted(site.clusters))
    for cluster in sorted(site.check.existing):
        if cluster not in site.clusters:
            yield ("check", "existing", cluster), f"{cluster!r} is not a cluster of this site; clusters: {clusters}"
    for i, accepted in enumerate(site.check.accept):
        if accepted.cluster not in site.clusters:
            yield ("check", "accept", i, "cluster"), f"{accepted.cluster!r} is not a cluster of this site; clusters: {clusters}"
        if (accepted.rule, accepted.cluster, accepted.object) in [(a.rule, a.cluster, a.object) for a in site.check.accept[:i]]:
            yield ("check", "accept", i), f"{accepted.rule} {accepted.cluster} {accepted.object!r} is accepted twice"


def replica_bucket(site: str, peer: str) -> str:
    """The bucket a site keeps a peer's gold in."""
    return f"{site}-replica-{peer}"


def _vip_problems(site: SiteConfig) -> Iterator[Problem]:
    """Every fixed VIP is used once: LB-IPAM hands an address to one Service unless told to share it."""
    vips: list[tuple[tuple[str | int, ...], Any]] = [
        (("clusters", key, "clustermesh_vip"), cluster.clustermesh_vip) for key, cluster in site.clusters.items()
    ]
    vips += [
        (("storage", "s3", "internal_vip"), site.storage.s3.internal_vip),
        (("storage", "s3", "external_vip"), site.storage.s3.external_vip),
        (("storage", "polaris", "vip"), site.storage.polaris.vip),
        (("inference", "gateway", "vip"), site.inference.gateway.vip),
        (("compute", "ingress", "vip"), site.compute.ingress.vip),
    ]
    seen: dict[Any, tuple[str | int, ...]] = {}
    for path, vip in vips:
        if vip is None:
            continue
        if vip in seen:
            yield path, f"{vip} is already used by {format_path(seen[vip])}; every endpoint needs its own address"
        seen.setdefault(vip, path)


# --------------------------------------------------------------------------------------------------
# Loading and error reporting.


class ConfigError(Exception):
    """A site config that cannot be used; `lines` are one problem each, ready to print."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def format_path(loc: tuple[str | int, ...]) -> str:
    """`clusters.gpu.lb_pools.internal.cidrs[0]`; keys that are not plain words are quoted: `to_labels['a.b/c']`."""
    out = ""
    for part in loc:
        if isinstance(part, int) or not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]" if isinstance(part, str) else f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _unwrap(tp: Any) -> Any:
    """Strip Optional[...] and Annotated[...] from a field type."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, UnionType):
            tp = next(a for a in get_args(tp) if a is not type(None))
        else:
            return tp


def _allowed_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The keys the model accepts at the mapping that holds `loc`'s last key."""
    tp: Any = SiteConfig
    for part in loc[:-1]:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = next((f for n, f in tp.model_fields.items() if (f.alias or n) == part), None)
            tp = field.annotation if field else None
        elif get_origin(tp) in (dict, list):
            tp = get_args(tp)[-1]
        else:
            return []
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return sorted(f.alias or n for n, f in tp.model_fields.items())
    return []


def _where(loc: tuple[str | int, ...]) -> str:
    path = format_path(loc)
    return f"{PROJECT}:{CONFIG_KEY}" + ("" if not path else path if path.startswith("[") else f".{path}")


def _error_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        error = err.get("ctx", {}).get("error")
        if isinstance(error, SiteRuleError):
            lines += [f"{_where(p)}: {msg}" for p, msg in error.problems]
            continue
        is_key = bool(loc) and loc[-1] == "[key]"  # pydantic's marker for a bad mapping key
        loc = loc[:-1] if is_key else loc
        where = _where(loc)
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc)
            hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
            lines.append(f"{where}: unknown key{hint}")
        elif err["type"] == "missing":
            lines.append(f"{where}: required key is missing")
        else:
            msg = str(error) if isinstance(error, ValueError) else err["msg"]
            msg = f"the key {msg}" if is_key else msg
            lines.append(f"{where}: {msg} (got {_show(err['input'])})")
    return lines


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_site(raw: Any) -> SiteConfig:
    """Validate the raw `fab-platform:site` object; raises ConfigError with one line per problem."""
    if raw is None:
        raise ConfigError([f"{PROJECT}:{CONFIG_KEY}: not set; add it to Pulumi.<stack>.yaml (see docs/configuration.md)"])
    if not isinstance(raw, Mapping):
        raise ConfigError([f"{PROJECT}:{CONFIG_KEY}: must be a mapping of site settings (got {type(raw).__name__})"])
    try:
        return SiteConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_error_lines(exc)) from None


def load_site() -> SiteConfig:
    """Read and validate `fab-platform:site` from the running stack's config.

    A user mistake ends the program with `pulumi.RunError`: the Pulumi CLI prints its lines and no traceback.
    """
    import pulumi

    try:
        raw = pulumi.Config(PROJECT).get_object(CONFIG_KEY)
    except pulumi.ConfigTypeError as exc:  # the CLI hands structured config over as JSON
        raise pulumi.RunError(f"{PROJECT}:{CONFIG_KEY}: not a valid structured value ({exc})") from None
    try:
        return parse_site(raw)
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None


@dataclass(frozen=True)
class SiteSecrets:
    """Secrets the program needs beyond the stack file, from `pulumi config set --secret`."""

    aistor_license: Any = None
    aistor_root_password: Any = None


def load_secrets(site: SiteConfig) -> SiteSecrets:
    """The secret config values the site needs; a missing one ends the program with the command that sets it."""
    import pulumi

    if not site.storage.object_store.install:
        return SiteSecrets()
    config = pulumi.Config(PROJECT)
    values = {key: config.get_secret(key) for key in ("aistorLicense", "aistorRootPassword")}
    missing = [key for key, value in values.items() if value is None]
    if missing:
        raise pulumi.RunError("\n".join(
            f"{PROJECT}:{key}: required because storage.object_store.install is true; set it with: "
            f"pulumi config set --secret {key} <value>"
            for key in missing
        ))
    return SiteSecrets(aistor_license=values["aistorLicense"], aistor_root_password=values["aistorRootPassword"])


def stack_file_schema() -> dict[str, Any]:
    """JSON Schema of a `Pulumi.<stack>.yaml` file whose `fab-platform:site` follows SiteConfig."""
    site = SiteConfig.model_json_schema(by_alias=True)
    defs = site.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "fab-platform stack file",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {f"{PROJECT}:{CONFIG_KEY}": site},
                "required": [f"{PROJECT}:{CONFIG_KEY}"],
            },
        },
        "required": ["config"],
        "$defs": defs,
    }
