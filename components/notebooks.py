"""GpuNotebooks: GPU notebooks on a GPU cluster, behind the compute ingress and Keycloak (DESIGN section 1, "Interactive:
... GPU notebooks or Ray on the GPU cluster for the few who need them"; issue 20, item 3).

KubeSpawner starts pods with the hub's own in-cluster credentials, in the hub's cluster: compute's JupyterHub cannot
start a server on a GPU cluster. So GPU notebooks have a JupyterHub of their own (the same chart and Keycloak sign-in as
compute's), on the GPU cluster named by `compute.jupyterhub.gpu_notebooks`. Its servers run on that cluster's
notebooks-pool nodes, whose GPUs the device plugin (time-slicing, `nvidia.com/gpu.shared`) or the MIG manager
(`nvidia.com/mig-<profile>`) shares (components/gpu.py): a notebook asks for one share, never a whole GPU.

Users reach it only through the compute ingress (https://gpu-notebooks.<domain>): an HTTPRoute on compute sends to a
selectorless Service whose EndpointSlice is the hub proxy's VIP in an internal pool of the GPU cluster, and the flow
gpu-notebooks admits compute's Envoy proxies, and nothing else, to the proxy's pods.

Quota per team: each team of `team_quotas` has a namespace `notebooks-<team>` there whose ResourceQuota caps its shares
(and holds zero whole GPUs); the hub offers each user one profile per team group they are in (Keycloak groups
`team-<team>`, from the token), whose servers start in that team's namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import Flow, SiteConfig, names
from components.config.views import NOTEBOOKS_FLOW
from components.config.schema.compute import GpuNotebooksConfig
from components.config.schema.gpu import GpuSharingConfig
from components.constants import (
    ENVOY_PROXY_LABELS,
    GATEWAY_NAMESPACE,
    GPU_NOTEBOOKS,
    NOTEBOOKS_PROXY_LABELS,
    NOTEBOOKS_PROXY_PORT,
    NOTEBOOKS_PROXY_TARGET_PORT,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    OIDC_ISSUER,
    TEAM_LABEL,
    SiteCa,
)
from components.engines import GATEWAY, Ui
from components.engines.jupyterhub import HUB_CHART, keycloak_authenticator, site_ca_mount
from components.gateway import ROUTES_LABEL, http_route
from components.gpu import NOTEBOOKS_POOL, POOL_LABEL, toleration
from components.identity import SiteIdentity, team_group_name
from components.kube import Adoption, helm_release, namespace
from components.network import CrossClusterNetwork
from components.providers import ClusterRef, NamespaceRef
from components.registry import UPSTREAM, Registry

GPU_NOTEBOOKS_UI = Ui(host=GPU_NOTEBOOKS, service=GPU_NOTEBOOKS, port=NOTEBOOKS_PROXY_PORT, callback="/hub/oauth_callback")
"""The notebooks hub's UI behind the compute ingress: its listener and DNS record come from ComputeCluster (`extra_uis`),
its route from GpuNotebooks."""
HUB_SERVICE_ACCOUNT = "hub"
"""The chart's hub ServiceAccount (jupyterhub 4.4.0, `hub.serviceAccount.name` unset)."""
HUB_PORT = 8081
SINGLEUSER_PORT = 8888
PROXY_VIP_SERVICE = "proxy-vip"
"""The hub proxy's LoadBalancer Service at the VIP: the chart's proxy-public cannot keep the caller's address
(`externalTrafficPolicy: Local`), which the flow's Cilium rule matches on, so it stays a ClusterIP Service."""
TEAM_PROFILES_KEY = "teamProfiles"
"""The chart's `custom` value holding each team group's profiles, which the hub's profile_list reads."""
TEAM_PROFILES_CONFIG = f"""\
from z2jh import get_config

_TEAM_PROFILES = get_config("custom.{TEAM_PROFILES_KEY}", {{}})


def _team_profiles(spawner):
    # One GPU profile per team group of the user (Keycloak groups, kept by the authenticator's manage_groups); KubeSpawner
    # accepts only a profile of this list, so nobody starts a server in another team's namespace.
    groups = sorted(group.name for group in spawner.user.groups)
    return [profile for group in groups for profile in _TEAM_PROFILES.get(group, [])]


c.KubeSpawner.profile_list = _team_profiles
"""
"""hub.extraConfig: the profiles a user sees are those of their team groups (KubeSpawner 7 takes a callable
profile_list)."""
RESTRICTED_CONTAINER = {
    "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""A notebook server container's security context: what Pod Security `restricted` asks of it."""
HUB_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list", "create", "delete"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "watch", "list"]},
]
"""What the hub does in a team namespace: start, watch and stop servers (no volumes: storage none; no Services or
Secrets: no named-server ports, no internal TLS)."""


@dataclass(frozen=True)
class GpuNotebooksArgs:
    config: GpuNotebooksConfig
    """The `compute.jupyterhub.gpu_notebooks` section: the cluster, the VIP, a notebook's size, the teams' quotas."""
    sharing: GpuSharingConfig
    """How that cluster shares its notebooks pool's GPUs (`gpu.<cluster>.sharing`): the resource a notebook asks for."""
    cluster: ClusterRef
    """The GPU cluster the hub and its notebooks run on."""
    compute: ClusterRef
    """The compute cluster, whose ingress users come through."""
    gateway: pulumi.Resource
    """The compute ingress Gateway, with the gpu-notebooks listener (ComputeCluster's `extra_uis`)."""
    domain: str
    network: CrossClusterNetwork
    """Gives the proxy's Service its internal pool (LB-IPAM) and the pool's object to wait for."""
    identity: SiteIdentity
    """The site's realm: the hub's sign-in client and the team groups."""
    adopt: Adoption
    """What exists already on the GPU cluster."""
    site_ca: Callable[[NamespaceRef], SiteCa] | None = None
    """Delivers the site CA's Secret to a namespace (`StorageCluster.site_ca`): the hub's sign-in trusts it. None: the
    system's CAs."""


class GpuNotebooks(pulumi.ComponentResource):
    """A JupyterHub on a GPU cluster whose notebooks take a share of a GPU, within their team's quota."""

    url: pulumi.Output[str]
    """Where users sign in."""
    quotas: pulumi.Output[dict[str, dict[str, Any]]]
    """Per team: its namespace on the GPU cluster and the notebooks it may run at once (the resource they take)."""

    def __init__(self, name: str, args: GpuNotebooksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:notebooks:GpuNotebooks", name, None, opts)
        config = args.config
        self._name = name
        # This component spans two clusters: every child names its provider.
        on_gpu = pulumi.ResourceOptions(parent=self, provider=args.cluster.provider)
        resource = args.sharing.resource()
        self._registry = args.cluster.registry
        hub_ns = namespace(f"{name}-ns", GPU_NOTEBOOKS, on_gpu, adopt=args.adopt, registry=self._registry)
        # the namespace must exist before anything is created in it
        after_ns = pulumi.ResourceOptions.merge(on_gpu, pulumi.ResourceOptions(depends_on=[hub_ns]))
        redirect = GPU_NOTEBOOKS_UI.redirect_uri(args.domain)
        client = args.identity.oidc_client(GPU_NOTEBOOKS, "browser", [redirect], description="GPU notebooks sign-in")
        secret = k8s.core.v1.Secret(
            f"{name}-oidc", metadata={"name": f"{GPU_NOTEBOOKS}-oidc", "namespace": GPU_NOTEBOOKS},
            string_data={OIDC_CLIENT_ID: client.client_id, OIDC_CLIENT_SECRET: client.client_secret, OIDC_ISSUER: client.issuer_url},
            opts=after_ns,
        )
        team_namespaces = [self._team(team, quota, resource, config, on_gpu) for team, quota in sorted(config.team_quotas.items())]
        ca = args.site_ca(NamespaceRef(args.cluster, GPU_NOTEBOOKS, hub_ns)) if args.site_ca is not None else SiteCa(None)
        helm_release(
            f"{name}-hub", versions.JUPYTERHUB, name=GPU_NOTEBOOKS, namespace=GPU_NOTEBOOKS,
            values=hub_values(config, resource, client.issuer_url, redirect, args.cluster.registry, site_ca=ca.secret is not None),
            # the hub reads its OIDC client from `secret` (and the site CA) when it starts, and starts servers in the team
            # namespaces
            opts=pulumi.ResourceOptions.merge(on_gpu, pulumi.ResourceOptions(depends_on=[secret, *ca.resources(), *team_namespaces])),
            adopt=args.adopt, registry=args.cluster.registry, images=HUB_CHART.images,
        )
        pool = args.network.lb_pool(args.cluster.key, config.pool)
        k8s.core.v1.Service(
            f"{name}-proxy-vip",
            metadata={"name": PROXY_VIP_SERVICE, "namespace": GPU_NOTEBOOKS,
                      "labels": args.network.lb_service_labels(args.cluster.key, config.pool),
                      "annotations": {"lbipam.cilium.io/ips": str(config.vip)}},
            spec={
                "type": "LoadBalancer",
                # Keeps the caller's address: the flow admits compute's Envoy proxies by their identity.
                "externalTrafficPolicy": "Local",
                "selector": NOTEBOOKS_PROXY_LABELS,
                "ports": [{"name": "http", "port": NOTEBOOKS_PROXY_PORT, "targetPort": NOTEBOOKS_PROXY_TARGET_PORT, "protocol": "TCP"}],
            },
            # LB-IPAM assigns the VIP from `pool`, in the hub's namespace. Not the release: the Service selects the chart's
            # proxy pods by label, and Pulumi waits for its endpoints by itself.
            opts=pulumi.ResourceOptions.merge(on_gpu, pulumi.ResourceOptions(depends_on=[hub_ns, pool])),
        )
        self._route(args)
        self.url = pulumi.Output.from_input(f"https://{GPU_NOTEBOOKS_UI.hostname(args.domain)}")
        self.quotas = pulumi.Output.from_input({
            team: {"namespace": names.NOTEBOOKS_NAMESPACE(team), "notebooks": quota, "resource": resource}
            for team, quota in sorted(config.team_quotas.items())
        })
        self.register_outputs({"url": self.url, "quotas": self.quotas})

    def _team(self, team: str, quota: int, resource: str, config: GpuNotebooksConfig,
              on_gpu: pulumi.ResourceOptions) -> k8s.core.v1.Namespace:
        """The team's notebook namespace: its quota of shares (zero whole GPUs), the hub's right to start servers there,
        and ingress from the hub and its proxy only."""
        ns_name = names.NOTEBOOKS_NAMESPACE(team)
        prefix = f"{self._name}-{team}"
        ns = namespace(f"{prefix}-ns", ns_name, on_gpu, registry=self._registry, labels={
            TEAM_LABEL: names.TEAM_LABEL(team),
            # The chart's hub NetworkPolicy (interNamespaceAccessLabels accept) admits servers of labelled namespaces.
            "hub.jupyter.org/network-access-hub": "true",
        })
        # the namespace must exist before anything is created in it
        after = pulumi.ResourceOptions.merge(on_gpu, pulumi.ResourceOptions(depends_on=[ns]))
        k8s.core.v1.ResourceQuota(
            f"{prefix}-quota", metadata={"name": "notebooks", "namespace": ns_name},
            spec={"hard": team_quota(quota, resource, config)}, opts=after,
        )
        role = k8s.rbac.v1.Role(f"{prefix}-hub-role", metadata={"name": f"{GPU_NOTEBOOKS}-hub", "namespace": ns_name},
                                rules=HUB_RULES, opts=after)
        k8s.rbac.v1.RoleBinding(
            f"{prefix}-hub-binding", metadata={"name": f"{GPU_NOTEBOOKS}-hub", "namespace": ns_name},
            subjects=[{"kind": "ServiceAccount", "name": HUB_SERVICE_ACCOUNT, "namespace": GPU_NOTEBOOKS}],
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{GPU_NOTEBOOKS}-hub"},
            # the Role first: binding a Role the API server cannot resolve takes the `bind` verb
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(depends_on=[role])),
        )
        k8s.networking.v1.NetworkPolicy(
            f"{prefix}-servers", metadata={"name": "notebook-servers", "namespace": ns_name},
            spec=server_ingress_policy(), opts=after,
        )
        return ns

    def _route(self, args: GpuNotebooksArgs) -> None:
        """On compute: the route of the gpu-notebooks listener to a Service whose only endpoint is the hub proxy's VIP."""
        name = self._name
        on_compute = pulumi.ResourceOptions(parent=self, provider=args.compute.provider)
        # A Service and a route only: no pod runs in it on compute.
        ns = namespace(f"{name}-compute-ns", GPU_NOTEBOOKS, on_compute, labels={ROUTES_LABEL: GATEWAY}, registry=UPSTREAM)
        # the namespace must exist before anything is created in it
        after = pulumi.ResourceOptions.merge(on_compute, pulumi.ResourceOptions(depends_on=[ns]))
        service = k8s.core.v1.Service(
            f"{name}-upstream", metadata={"name": GPU_NOTEBOOKS_UI.service, "namespace": GPU_NOTEBOOKS},
            # No selector: its endpoints are the EndpointSlice below, the VIP on the GPU cluster.
            spec={"type": "ClusterIP", "ports": [{"name": "http", "port": NOTEBOOKS_PROXY_PORT, "protocol": "TCP"}]},
            opts=after,
        )
        slice_ = k8s.discovery.v1.EndpointSlice(
            f"{name}-upstream-endpoints",
            metadata={"name": f"{GPU_NOTEBOOKS_UI.service}-vip", "namespace": GPU_NOTEBOOKS,
                      "labels": {"kubernetes.io/service-name": GPU_NOTEBOOKS_UI.service,
                                 "endpointslice.kubernetes.io/managed-by": "fab-platform"}},
            address_type="IPv4",
            endpoints=[{"addresses": [str(args.config.vip)], "conditions": {"ready": True}}],
            ports=[{"name": "http", "port": NOTEBOOKS_PROXY_PORT, "protocol": "TCP"}],
            opts=after,
        )
        http_route(
            # The Gateway's listener (after the Gateway API CRDs), and the Service and endpoint it sends to: the route never
            # points at a missing backend.
            f"{name}-route", pulumi.ResourceOptions.merge(on_compute, pulumi.ResourceOptions(depends_on=[args.gateway, service, slice_])),
            name=GPU_NOTEBOOKS, namespace_=GPU_NOTEBOOKS, gateway=GATEWAY, listener=GPU_NOTEBOOKS_UI.host,
            hostname=GPU_NOTEBOOKS_UI.hostname(args.domain),
            rules=[{"backendRefs": [{"name": GPU_NOTEBOOKS_UI.service, "port": NOTEBOOKS_PROXY_PORT}]}],
        )


def team_quota(quota: int, resource: str, config: GpuNotebooksConfig) -> dict[str, str]:
    """A team's ResourceQuota: `quota` shares of a GPU and the CPU and memory of as many notebooks; no whole GPU."""
    return {
        f"requests.{resource}": str(quota),
        "requests.nvidia.com/gpu": "0",
        "requests.cpu": _cores(config.cpu * quota),
        "requests.memory": f"{config.memory_gib * quota}Gi",
        "limits.cpu": _cores(config.cpu * quota),
        "limits.memory": f"{config.memory_gib * quota}Gi",
    }


def _cores(cores: float) -> str:
    return str(int(cores)) if float(cores).is_integer() else f"{round(cores * 1000)}m"


def server_ingress_policy() -> dict[str, Any]:
    """Notebook servers take connections from the hub and its proxy (in the hub's namespace) on their port only."""
    return {
        "podSelector": {"matchLabels": {"component": "singleuser-server"}},
        "policyTypes": ["Ingress"],
        "ingress": [{
            "from": [{
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": GPU_NOTEBOOKS}},
                "podSelector": {"matchExpressions": [{"key": "component", "operator": "In", "values": ["hub", "proxy"]}]},
            }],
            "ports": [{"port": SINGLEUSER_PORT, "protocol": "TCP"}],
        }],
    }


def team_profiles(config: GpuNotebooksConfig, resource: str) -> dict[str, list[dict[str, Any]]]:
    """Per team group, its one GPU profile: a notebook of the configured size with one share of a GPU, started in the
    team's namespace (KubeSpawner 7 applies a profile's `namespace` override before it watches the pod)."""
    size = {"cpu_guarantee": config.cpu, "cpu_limit": config.cpu,
            "mem_guarantee": f"{config.memory_gib}G", "mem_limit": f"{config.memory_gib}G"}
    return {
        team_group_name(team): [{
            "display_name": f"GPU notebook ({team})",
            "slug": team,
            "description": f"{config.cpu:g} CPU, {config.memory_gib} GiB, one {resource}; counts against {team}'s {quota} "
                           "notebooks",
            "kubespawner_override": {
                **size,
                "namespace": names.NOTEBOOKS_NAMESPACE(team),
                "extra_resource_guarantees": {resource: "1"},
                "extra_resource_limits": {resource: "1"},
                "extra_labels": {TEAM_LABEL: names.TEAM_LABEL(team)},
            },
        }]
        for team, quota in sorted(config.team_quotas.items())
    }


def hub_values(config: GpuNotebooksConfig, resource: str, issuer: str, redirect: str,
               registry: Registry = UPSTREAM, site_ca: bool = False) -> dict[str, Any]:
    """The notebooks hub's chart values: compute's Keycloak sign-in, open to the teams with a quota, servers on the
    notebooks pool in their team's namespace, the configured single-user image from `registry` (the chart's images, its
    default single-user image and the pull Secret are components/airgap's). `site_ca`: the site CA's Secret is in the
    hub's namespace, and the sign-in trusts it."""
    secret = f"{GPU_NOTEBOOKS}-oidc"
    singleuser: dict[str, Any] = {
        # The server's disk is scratch (DESIGN: local disks are cache only): work is kept in AIStor or Git.
        "storage": {"type": "none"},
        "nodeSelector": {POOL_LABEL: NOTEBOOKS_POOL},
        "extraTolerations": [toleration(NOTEBOOKS_POOL)],
        "networkPolicy": {"egressAllowRules": {"privateIPs": True}},
        # No cloud metadata endpoint on site, and its iptables init container needs NET_ADMIN as root, which the
        # team namespaces (Pod Security restricted) refuse.
        "cloudMetadata": {"blockWithIptables": False},
    }
    values: dict[str, Any] = {
        "hub": {
            "config": {
                "JupyterHub": {
                    "authenticator_class": "generic-oauth",
                    # Servers run in the team namespaces, where the chart's short name `hub` does not resolve.
                    "hub_connect_url": f"http://hub.{GPU_NOTEBOOKS}.svc:{HUB_PORT}",
                },
                "GenericOAuthenticator": keycloak_authenticator(
                    issuer, redirect, sorted(team_group_name(team) for team in config.team_quotas), site_ca=site_ca),
                "KubeSpawner": {
                    # Servers run in the team namespaces at Pod Security `restricted`, which KubeSpawner's defaults
                    # (a uid and no privilege escalation) do not meet on their own.
                    "container_security_context": RESTRICTED_CONTAINER,
                    # The whole reference (tag or digest); the chart's singleuser.image joins a name and a tag.
                    **({"image": registry.image(config.image)} if config.image is not None else {}),
                },
            },
            "extraConfig": {"fab-team-profiles": TEAM_PROFILES_CONFIG},
            "extraEnv": {
                "OAUTH_CLIENT_ID": {"valueFrom": {"secretKeyRef": {"name": secret, "key": OIDC_CLIENT_ID}}},
                "OAUTH_CLIENT_SECRET": {"valueFrom": {"secretKeyRef": {"name": secret, "key": OIDC_CLIENT_SECRET}}},
            },
            "networkPolicy": {"interNamespaceAccessLabels": "accept"},
        },
        "custom": {TEAM_PROFILES_KEY: team_profiles(config, resource)},
        # The VIP Service (proxy-vip) is the proxy's only way in from outside the cluster.
        "proxy": {"service": {"type": "ClusterIP"}},
        "scheduling": {"userScheduler": {"enabled": False}, "userPlaceholder": {"enabled": False}},
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
        "singleuser": singleuser,
    }
    if site_ca:
        site_ca_mount(values["hub"])
    return values


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


def notebooks_flow(site: SiteConfig) -> Flow:
    """The compute ingress's proxies to the GPU notebooks hub's proxy, at its internal VIP: users reach GPU notebooks only
    through the compute ingress, and nothing else reaches the hub."""
    notebooks = site.compute.jupyterhub.gpu_notebooks
    assert notebooks is not None
    return Flow(
        description="The compute ingress forwards GPU notebook users to the notebooks hub's proxy on the GPU cluster.",
        sources=site.keys_with_role("compute"), to=[notebooks.cluster], port=NOTEBOOKS_PROXY_PORT,
        target_port=NOTEBOOKS_PROXY_TARGET_PORT, to_namespace=GPU_NOTEBOOKS, to_labels=NOTEBOOKS_PROXY_LABELS,
        from_namespace=GATEWAY_NAMESPACE, from_labels=ENVOY_PROXY_LABELS,
    )


def notebooks_flows(site: SiteConfig) -> dict[str, Flow]:
    """The GPU notebooks' flow, while they are on (compute.jupyterhub.gpu_notebooks)."""
    return {NOTEBOOKS_FLOW: notebooks_flow(site)} if site.compute.jupyterhub.gpu_notebooks is not None else {}
