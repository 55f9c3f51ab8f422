"""Names the program derives from config keys, and the limit each must fit (DESIGN section 4, "Names are contracts").

Every Kubernetes name, label value, host name, bucket and Helm release name made from a config key is declared
here once: its template, what it names and the limit of that kind of name. Components build their names with these
templates; a key's type carries the names made from it (`Derives`), so that the check in
`components.config.checks.names` checks the site's actual keys against every one of them before any resource
exists, and the generated reference (docs/configuration.md) states each key's limit next to it.

Templates name the key `{key}`; `{site}` is the site's name where a name joins both, which is then checked on the
real pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from string import Formatter
from typing import Annotated, Any, get_args, get_origin

from components.config import declared
from components.config.fields import CILIUM_CLUSTER_NAME_MAX, DnsLabel, DnsName


@dataclass(frozen=True)
class Limit:
    """What a kind of name allows, and who says so."""

    max_length: int
    authority: str
    letter_first: bool = False
    """A DNS-1035 label (a Service name): it must also start with a letter."""
    where: str = ""
    """Where the limit applies when the name is not an object's own (`in a label value`)."""


DNS_LABEL = Limit(63, "Kubernetes")
"""Namespaces, volume names, Jobs (their name is a label value of their pods)."""
LABEL_VALUE = Limit(63, "Kubernetes", where=" in a label value")
DNS_1035_LABEL = Limit(63, "Kubernetes", letter_first=True)
"""Service names."""
DNS_SUBDOMAIN = Limit(253, "Kubernetes")
"""Every other object name."""
CRONJOB = Limit(52, "Kubernetes")
"""A CronJob's Jobs are named `<cronjob>-<11 digits>`, and a Job's name is a label value (63)."""
HELM_RELEASE = Limit(53, "Helm")
"""Helm keeps 10 of Kubernetes' 63 characters for the names a chart adds to its release name."""
S3_BUCKET = Limit(63, "S3")
CILIUM_CLUSTER = Limit(CILIUM_CLUSTER_NAME_MAX, "Cilium")
HOST_NAME = Limit(253, "DNS")
KEYCLOAK = Limit(255, "Keycloak")
"""Keycloak stores client ids and group names in columns of 255 characters."""
S3_KEY = Limit(1024, "S3", where=" in an object key")


@dataclass(frozen=True)
class Derived:
    """A name made from a config key: what it names, its template and the limit of that kind of name."""

    names: str
    template: str
    limit: Limit
    partner: str = ""
    """Where a template that joins the site name takes its key from (`clusters`): the site name's side of the pair."""

    def __call__(self, key: str, site: str = "") -> str:
        return self.template.format(key=key, site=site)

    @property
    def joins_site(self) -> bool:
        return "{site}" in self.template

    @property
    def key_first_letter(self) -> bool:
        """Whether the key must start with a letter: the name does, and begins with the key."""
        return self.limit.letter_first and self.template.startswith("{key}")

    def room(self, site: str = "") -> int:
        """The longest key whose name fits, with this site name."""
        return self.limit.max_length - len(self("", site))

    def how(self, noun: str) -> str:
        """How the name is made, for a reader: `'team-' + key`, `site name + '-' + key`."""
        parts = []
        for literal, field_name, _, _ in Formatter().parse(self.template):
            parts += [repr(literal)] if literal else []
            parts += ["site name" if field_name == "site" else noun] if field_name else []
        return " + ".join(parts)

    def shown(self, noun: str, site: str = "<site>") -> str:
        """The template as the reference shows it: `team-<key>`."""
        return self.template.format(key=f"<{noun}>", site=site)


@dataclass(frozen=True)
class Derives:
    """Type metadata of a config key: the names made from it (a key checked on its own, or in a pair with the site name).

    `site_name` marks the site's name itself, the other half of the pairs; those are checked on the keys they join.
    `more` adds names declared elsewhere (the UI host names of the engines), looked up when asked for.
    """

    derived: tuple[Derived, ...] = ()
    more: Callable[[], tuple[Derived, ...]] | None = field(default=None, compare=False)
    site_name: bool = False

    def all(self) -> tuple[Derived, ...]:
        return (*self.derived, *(self.more() if self.more else ()))

    def summary(self, noun: str) -> str:
        """The limit as the reference states it next to the key."""
        derived = self.all()
        if self.site_name:
            return "; ".join(
                f"with each key of `{d.partner}`, {d.names} `{d.shown('key', site='<' + noun + '>')}` at most {d.limit.max_length} "
                "characters" for d in derived
            )
        parts = []
        alone = [d for d in derived if not d.joins_site]
        if alone:
            tightest = min(alone, key=lambda d: d.room())
            parts.append(f"at most {tightest.room()} characters ({tightest.names} `{tightest.shown(noun)}`)")
        parts += [f"{d.names} `{d.shown(noun)}` at most {d.limit.max_length} characters" for d in derived if d.joins_site]
        parts += [f"starts with a letter ({d.names} `{d.shown(noun)}`)" for d in derived if d.key_first_letter][:1]
        return ", ".join(parts)


def derives(tp: Any) -> Derives | None:
    """The `Derives` metadata of a field or key type, if any."""
    if get_origin(tp) is Annotated:
        return next((m for m in get_args(tp)[1:] if isinstance(m, Derives)), None)
    return None


# Names made from the site name and a key ---------------------------------------------------------------------

CLUSTER_NAME = Derived("cluster name", "{site}-{key}", CILIUM_CLUSTER, partner="clusters")
"""Cilium's cluster name and the Kubernetes provider's name of a cluster."""
REPLICA_BUCKET = Derived("bucket", "{site}-replica-{key}", S3_BUCKET, partner="federation.peers")
"""The bucket this site keeps a peer's gold in."""

# Cluster keys -------------------------------------------------------------------------------------------------

SUBMITTER_KUBECONFIG = Derived("volume", "gpu-{key}-kubeconfig", DNS_LABEL)
"""The Secret in Airflow's namespace with a GPU cluster's submitter kubeconfig, mounted as a volume of that name."""
MULTIKUEUE_KUBECONFIG = Derived("Secret", "multikueue-{key}", DNS_SUBDOMAIN)
SERVING_APPLICATION = Derived("Argo CD Application", "serving-{key}", DNS_SUBDOMAIN)
"""The Application that applies a serving cluster's directory of the serving repository (Argo CD on compute)."""
SERVING_CLUSTER_SECRET = Derived("Secret", "cluster-{key}", DNS_SUBDOMAIN)
"""The Argo CD cluster Secret of a serving cluster, in Argo CD's namespace on compute."""

# Teams ----------------------------------------------------------------------------------------------------------

TEAM_NAMESPACE = Derived("namespace", "team-{key}", DNS_LABEL)
"""A team's namespace on every Kueue cluster, which is also its ClusterQueue."""
TEAM_LABEL = Derived("label value", "{key}", LABEL_VALUE)
"""`fab.internal/team` on the team's namespaces."""
TEAM_GROUP = Derived("Keycloak group", "team-{key}", KEYCLOAK)
TEAM_GATEWAY_CLIENT = Derived("Keycloak client id", "inference-{key}", KEYCLOAK)
"""The team's client of the inference gateway."""
TEAM_POLARIS_SETUP = Derived("Job", "polaris-team-{key}", DNS_LABEL)
RAY_FLOW = Derived("flow", "ray-{key}", LABEL_VALUE)
"""The flow from Jupyter on compute to a team's Ray heads."""
RAY_TOKEN_SECRET = Derived("Secret", "ray-token-{key}", DNS_SUBDOMAIN)
"""A team's Ray token in compute's JupyterHub namespace (mounted into its members' servers only)."""
"""The Job on the storage cluster that creates the team's Polaris principal, and the Secret there with its credentials."""
SPARK_CONNECT_NAMESPACE = Derived("namespace", "spark-team-{key}", DNS_LABEL)
"""The team's Spark Connect server on compute (`compute.spark.connect`), running as the team's own principal."""
TEAM_MEMBER_LABEL = Derived("label name", "member-of-{key}", LABEL_VALUE)
"""With the prefix `fab.internal/` (`team_member_label`): JupyterHub's mark on a user server of each team its user is in
(Keycloak group `team-<key>`), the identity the team's Spark Connect server and Ray heads admit."""
NOTEBOOKS_NAMESPACE = Derived("namespace", "notebooks-{key}", DNS_LABEL)
"""The team's namespace for GPU notebooks on the notebooks cluster, whose ResourceQuota is the team's notebook quota."""

# Served models --------------------------------------------------------------------------------------------------

VLLM = Derived("Service", "vllm-{key}", DNS_1035_LABEL)
"""A model's Service, and its Deployment, PodDisruptionBudget, HTTPRoute and route policies."""
VLLM_CANARY = Derived("Service", "vllm-{key}-canary", DNS_1035_LABEL)
"""A model's canary: its Deployment and Service."""
EPP = Derived("Service", "epp-{key}", DNS_1035_LABEL)
"""A model's endpoint picker under `inference.routing: inference-extension`: its Deployment, Service, ServiceAccount,
RBAC and ConfigMap (components/routing.py). Shorter than VLLM, so it fits wherever the model's Service name does; not
`vllm-`, which names the serving objects (those Argo CD applies under `inference.delivery: argocd`)."""
MODEL_LABEL = Derived("label value", "{key}", LABEL_VALUE)
"""`fab.internal/model` on the model's pods."""

# GPU types ------------------------------------------------------------------------------------------------------

GPU_TYPE_LABEL = Derived("label value", "{key}", LABEL_VALUE)
"""The GPU type label NFD puts on a pool's nodes, which a ResourceFlavor selects."""
FLAVOR = Derived("ResourceFlavor", "training-{key}", DNS_SUBDOMAIN)

# Flows ----------------------------------------------------------------------------------------------------------

FLOW_LABEL = Derived("label value", "{key}", LABEL_VALUE)
"""`fab.internal/flow` on the flow's Cilium policy."""
FLOW_POLICY = Derived("CiliumClusterwideNetworkPolicy", "fab-flow-{key}", DNS_SUBDOMAIN)
EGRESS_POLICY = Derived("CiliumClusterwideNetworkPolicy", "fab-egress-{key}", DNS_SUBDOMAIN)
"""Default-deny egress of a world flow's source namespace (Trino's), keyed by the namespace."""
WORLD_DENY_POLICY = Derived("CiliumClusterwideNetworkPolicy", "fab-deny-{key}", DNS_SUBDOMAIN)
"""A world flow's deny for every other pod of its source clusters. Not `fab-flow-{key}-others`, which is also the allow
policy of a flow named `<key>-others` (or of an external catalog named `<x>_others`): no flow's policy starts `fab-deny-`."""

# Federated sites ------------------------------------------------------------------------------------------------

FEDERATION_S3_FLOW = Derived("flow", "federation-{key}-s3", LABEL_VALUE)
"""The flow that admits a federated site to the S3 endpoint; its name is the `fab.internal/flow` label of its policy."""
FEDERATION_POLARIS_FLOW = Derived("flow", "federation-{key}-polaris", LABEL_VALUE)
"""The flow that admits a consumer to Polaris."""
GOLD_COPY_JOB = Derived("CronJob", "gold-to-{key}", CRONJOB)
"""The job that copies this site's gold into a consumer's replica."""
MODELS_COPY_JOB = Derived("CronJob", "models-to-{key}", CRONJOB)
"""The job that copies this site's models into a consumer that keeps them (`replicate_models`). Only made when asked for,
so its length is checked by the federation checks, not by type (it would shorten every consumer's key otherwise)."""
REPLICA_TARGET = Derived("Secret", "replica-target-{key}", DNS_SUBDOMAIN)
"""A consumer's replica bucket and writer keys, read by the gold copy job."""
PEER_CATALOG = Derived("Secret", "polaris-peer-{key}", DNS_SUBDOMAIN)
"""Trino's principal on a peer's Polaris."""
MODEL_REPLICAS = "replicas"
"""The folder of the models bucket under which a site keeps its peers' models (`standby_models`), one prefix per peer;
a site's models copy job leaves it out, so that a peer's models never travel on to a third site."""
MODEL_REPLICA_PREFIX = Derived("prefix of the models bucket", MODEL_REPLICAS + "/{key}/", S3_KEY)
"""Where a site keeps a peer's models (`federation.peers.<peer>.standby_models`): its standby serving reads them there."""
REMOTE_TEAM_NAMESPACE = Derived("namespace", "remote-{site}-{key}", DNS_LABEL)
"""A peer's team's namespace (and ClusterQueue) on every Kueue cluster: `{site}` is the peer, `{key}` its team. Made of
two keys, so its length is checked by the federation checks, not by type."""
REMOTE_TEAM_GROUP = Derived("Keycloak group", "remote-{site}-{key}", KEYCLOAK)
"""The group of this site's Keycloak whose members act for a peer's team."""

# Profiles -------------------------------------------------------------------------------------------------------

PROFILE_SWITCH = Derived("CronJob", "fab-profile-{key}", CRONJOB)
"""The CronJob that switches a cluster to a scheduled profile (`profile_schedule`), and the ConfigMap with what it applies."""

# The object store -----------------------------------------------------------------------------------------------

OBJECT_STORE_RELEASE = Derived("Helm release name", "{key}", HELM_RELEASE)
OBJECT_STORE_SERVICE = Derived("Service", "{key}-s3", DNS_1035_LABEL)
OBJECT_STORE_SECRET = Derived("Secret", "{key}-env", DNS_SUBDOMAIN)

# Equipment vendors (storage.vendors) ---------------------------------------------------------------------------

VENDOR_PRINCIPAL = Derived("Polaris principal, MinIO user and policy", "fab-vendor-{key}", DNS_LABEL)
"""A vendor's Polaris principal, principal role and catalog role, and its MinIO user and policy."""
VENDOR_SECRET = Derived("Secret", "vendor-{key}", DNS_SUBDOMAIN)
"""The Secret in Polaris' namespace with the vendor's Polaris client and S3 keys, which operators hand over."""
VENDOR_POLARIS_SETUP = Derived("Job", "polaris-vendor-{key}", DNS_LABEL)
"""The Job on the storage cluster that creates the vendor's principal and sets its grants to those configured."""

# Host names under the site's domain -----------------------------------------------------------------------------

GATEWAY_HOST = Derived("host name", "llm.{key}", HOST_NAME)
"""The inference gateway's host name, unless `inference.gateway.hostname` names it."""
S3_HOST = Derived("host name", "s3.{key}", HOST_NAME)
S3_EXTERNAL_HOST = Derived("host name", "s3-external.{key}", HOST_NAME)
POLARIS_HOST = Derived("host name", "polaris.{key}", HOST_NAME)
CATALOG_HOST = Derived("host name", "catalog.{key}", HOST_NAME)
"""The Polaris catalog API for equipment vendors, on the compute ingress (`storage.vendors`)."""


def ui_hosts() -> tuple[Derived, ...]:
    """The host name of each engine's UI (`<host>.<domain>`), as the engines declare them (components.config.declared)."""
    return tuple(Derived("host name", f"{e.ui_host}.{{key}}", HOST_NAME) for e in declared.engines().values() if e.ui_host is not None)


# Key types ------------------------------------------------------------------------------------------------------

SiteName = Annotated[DnsLabel, Derives((CLUSTER_NAME, REPLICA_BUCKET), site_name=True)]
Domain = Annotated[DnsName, Derives((GATEWAY_HOST, S3_HOST, S3_EXTERNAL_HOST, POLARIS_HOST, CATALOG_HOST), more=ui_hosts)]
ClusterKey = Annotated[DnsLabel, Derives((CLUSTER_NAME, SUBMITTER_KUBECONFIG, MULTIKUEUE_KUBECONFIG, SERVING_APPLICATION,
                                         SERVING_CLUSTER_SECRET))]
TeamKey = Annotated[DnsLabel, Derives((TEAM_NAMESPACE, TEAM_LABEL, TEAM_GROUP, TEAM_GATEWAY_CLIENT, TEAM_POLARIS_SETUP,
                                      NOTEBOOKS_NAMESPACE, RAY_FLOW, RAY_TOKEN_SECRET, SPARK_CONNECT_NAMESPACE,
                                      TEAM_MEMBER_LABEL))]
ModelKey = Annotated[DnsLabel, Derives((VLLM, MODEL_LABEL))]
GpuTypeKey = Annotated[DnsLabel, Derives((GPU_TYPE_LABEL, FLAVOR))]
FlowKey = Annotated[DnsLabel, Derives((FLOW_LABEL, FLOW_POLICY))]
ConsumerKey = Annotated[DnsLabel, Derives((GOLD_COPY_JOB, FEDERATION_S3_FLOW, FEDERATION_POLARIS_FLOW, REPLICA_TARGET))]
PeerKey = Annotated[DnsLabel, Derives((REPLICA_BUCKET, FEDERATION_S3_FLOW, PEER_CATALOG, MODEL_REPLICA_PREFIX))]
ProfileKey = Annotated[DnsLabel, Derives((PROFILE_SWITCH,))]
VendorKey = Annotated[DnsLabel, Derives((VENDOR_PRINCIPAL, VENDOR_SECRET, VENDOR_POLARIS_SETUP))]
ObjectStoreName = Annotated[DnsLabel, Derives((OBJECT_STORE_RELEASE, OBJECT_STORE_SERVICE, OBJECT_STORE_SECRET))]


def team_member_label(team: str) -> str:
    """The label key JupyterHub sets (to `member`) on the user servers of a team's members (TEAM_MEMBER_LABEL)."""
    return f"fab.internal/{TEAM_MEMBER_LABEL(team)}"


TEAM_MEMBER = "member"
"""The value of `team_member_label(team)` on a team member's server."""


LAKE_CATALOG = "fab"
"""Trino's catalog on this site's Polaris."""


def peer_trino_catalog(peer: str) -> str:
    """Trino's catalog on a federated peer's Polaris: the peer's key as a catalog name."""
    return peer.replace("-", "_")


def team_schema(team: str) -> str:
    """A team's own schema of the lake catalog (its Polaris namespace): the team's key as an unquoted SQL name."""
    return team.replace("-", "_")


def external_catalog_secret(catalog: str) -> str:
    """The Secret in Trino's namespace holding an external catalog's account (`compute.trino.external_catalogs`)."""
    return f"trino-catalog-{catalog.replace('_', '-')}"


def external_catalog_flow(catalog: str) -> str:
    """The egress flow from Trino's pods to an external catalog's database."""
    return f"trino-catalog-{catalog.replace('_', '-')}"


def external_catalog_password_key(catalog: str) -> str:
    """The secret config key (`pulumi config set --secret`) holding an external catalog's password."""
    return f"trinoCatalogPassword-{catalog}"
