"""SiteObservability: the metrics stack of every cluster, and the site's one Grafana (issue 19, item 1; roadmap phase 04,
"performance metrics verified").

Per cluster: kube-prometheus-stack (the Prometheus operator, a Prometheus labelled with its site and cluster, Alertmanager,
kube-state-metrics, node-exporter on every node) in the `monitoring` namespace, node-exporter in a privileged namespace of
its own that every cluster allow-lists, and the scrape targets, alert rules and dashboards handed in as manifests. The
site's series are kept in one place: compute's Prometheus, which the other clusters remote-write to at its receiver VIP
(the flow `metrics`, declared in components/monitors.py), or the site's own store that every Prometheus writes to.
Grafana runs on compute only, behind the compute ingress, signing in through the site's Keycloak. Like
CrossClusterNetwork it spans clusters, so every child names its cluster's provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.alerts import alert_rules
from components.config import AdoptConfig, ObservabilityConfig, names
from components.constants import (
    GRAFANA_DASHBOARD_LABEL,
    MONITORING_NAMESPACE,
    NODE_EXPORTER_NAMESPACE,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    PROMETHEUS_POD_LABELS,
    PROMETHEUS_PORT,
    SITE_CA_DIR,
    SITE_CA_FILE,
    SITE_CA_SECRET,
    SiteCa,
)
from components.engines import GATEWAY, INTERACTIVE, Ui
from components.gateway import ROUTES_LABEL, http_route
from components.identity import PLATFORM_ADMINS, SiteIdentity
from components.kube import Adoption, helm_release, namespace, random_secret
from components.monitors import MetricsScope, scrape_targets
from components.network import CrossClusterNetwork
from components.network_policies import fence_policy
from components.providers import ClusterRef, NamespaceRef, SiteRef

RELEASE = "metrics"
"""The kube-prometheus-stack release on every cluster, also its objects' name prefix (`fullnameOverride`): the
Prometheus `metrics-prometheus` (Service of the same name), the Alertmanager `metrics-alertmanager`."""
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"
PROMETHEUS_URL = f"http://{PROMETHEUS_SERVICE}.{MONITORING_NAMESPACE}:{PROMETHEUS_PORT}"
"""Every cluster's Prometheus, from inside that cluster (Grafana's in-cluster data source, fabctl verify's queries)."""
RECEIVER_SERVICE = "prometheus-receiver"
"""compute's LoadBalancer Service at the receiver VIP, while metrics is in-cluster."""
REMOTE_WRITE_SECRET = "metrics-remote-write"
"""Basic-auth user and password at the site's metrics store (keys `username`, `password`), on every cluster."""
ALERT_WEBHOOK_SECRET = "alert-webhook"
"""The site's alert hub URL (key `url`, from the secret config `alertWebhookUrl`), beside each Alertmanager, which reads it
from its mount (`alertmanagerSpec.secrets`) as the webhook's `url_file`: never in Helm values."""
ALERT_WEBHOOK_FILE = f"/etc/alertmanager/secrets/{ALERT_WEBHOOK_SECRET}/url"
GRAFANA_ADMIN_SECRET = "grafana-admin"
GRAFANA_OIDC_SECRET = "grafana-oidc"
GRAFANA = Ui(host="grafana", service="grafana", port=80, callback="/login/generic_oauth")
"""Grafana behind the compute ingress: its Service (the subchart's, `grafana.fullnameOverride`) and its OAuth callback."""
GRAFANA_USER = 472
"""The Grafana image's user."""
PRIVILEGED_REASON = "node-exporter reads the node's network, processes and filesystems (host network, host PID, root mount)"
ALERTMANAGER_STORAGE_GIB = 1
"""Alertmanager's volume: silences and the notification log, a few MiB."""
DISABLED_TARGETS = ("kubeEtcd", "kubeControllerManager", "kubeScheduler", "kubeProxy")
"""Control-plane targets the chart would scrape and that these clusters do not offer: etcd, the controller manager and
the scheduler listen on the control-plane hosts' loopback (kubeadm's default) where no pod reaches them, and Cilium
replaces kube-proxy (`kubeProxyReplacement`). Their default rules go with them."""
NOT_FORWARDED = "ALERTS|ALERTS_FOR_STATE|prometheus_notifications_alertmanagers_discovered"
"""Series a cluster that does not evaluate rules (evaluates_rules) keeps out of its remote write to compute: alert
states, should a rule be added by hand, and its count of Alertmanagers, 0 by design, which compute's default rule
PrometheusNotConnectedToAlertmanagers would page on. Recorded series (`level:metric:operation`) are not dropped by name
(vLLM's own series have a colon too); such a cluster has no recording rules."""
INHIBIT_RULES = [
    {"source_matchers": ["severity = critical"], "target_matchers": ["severity =~ warning|info"],
     "equal": ["cluster", "namespace", "alertname"]},
    {"source_matchers": ["severity = warning"], "target_matchers": ["severity = info"], "equal": ["cluster", "namespace", "alertname"]},
    {"source_matchers": ["alertname = InfoInhibitor"], "target_matchers": ["severity = info"], "equal": ["cluster", "namespace"]},
    {"target_matchers": ["alertname = InfoInhibitor"]},
]
"""The chart's default inhibitions, each within one cluster: one Alertmanager gets every cluster's alerts while metrics is
in-cluster, and a critical alert on one cluster must not silence the same alert on another."""
DISABLED_RULES = ("etcd", "kubeControllerManager", "kubeSchedulerAlerting", "kubeSchedulerRecording", "kubeProxy", "windows")


def _resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit, "memory": memory_limit}}


CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


@dataclass(frozen=True)
class SiteObservabilityArgs:
    site: SiteRef
    """The site, whose name labels every series (external label `site`) and whose domain Grafana is reached under."""
    clusters: dict[str, ClusterRef]
    """Every cluster of the site, by key: each runs a Prometheus."""
    config: ObservabilityConfig
    """The `observability` section: where the series are kept, retention, volume, Grafana, alerts."""
    adopt: AdoptConfig
    """Declares the namespaces and releases that exist already."""
    network: CrossClusterNetwork
    """Gives compute's receiver Service its internal pool (LB-IPAM) and the pool's object to wait for."""
    identity: SiteIdentity
    """The site's Keycloak realm: Grafana's sign-in client."""
    teams: Sequence[str]
    """The teams, whose members see Grafana (Viewer)."""
    receiver_pool: str | None = None
    """The internal pool of compute holding `config.receiver_vip`, while metrics is in-cluster."""
    gateway: pulumi.Resource | None = None
    """The compute ingress Gateway, with Grafana's listener (ComputeCluster's `extra_uis`), while Grafana is on."""
    remote_write_password: pulumi.Input[str] | None = None
    """The password of `remote_write.username` (secret config `metricsRemoteWritePassword`), while it is set."""
    alert_webhook_url: pulumi.Input[str] | None = None
    """Where every Alertmanager sends alerts (secret config `alertWebhookUrl`), or None: they stay in Alertmanager."""
    objects: Mapping[str, Sequence[dict[str, Any]]] = field(default_factory=dict)
    """Manifests per cluster key registered after the chart: ServiceMonitors, PodMonitors, PrometheusRules and dashboard
    ConfigMaps (the latter in the monitoring namespace on compute)."""
    site_ca: Callable[[NamespaceRef], SiteCa] | None = None
    """Delivers the site CA's Secret to a namespace (`StorageCluster.site_ca`): Grafana's sign-in trusts it when calling
    the realm's token and userinfo endpoints. None: the system's CAs (Grafana's default)."""
    query_namespaces: Sequence[str] = ()
    """Namespaces on compute whose pods query its Prometheus besides Grafana: the acceptance jobs' (`fabctl verify`)."""
    scrape_secrets: Mapping[str, Sequence[pulumi.Resource]] = field(default_factory=dict)
    """Per cluster key, the Secrets its monitors present (AIStor's token and the site CA, in the object store's namespace,
    where the monitor that presents them lives): the monitors wait for them too."""


class SiteObservability(pulumi.ComponentResource):
    """Prometheus, Alertmanager and the exporters on every cluster of the site; Grafana on compute."""

    prometheus: pulumi.Output[dict[str, str]]
    """Per cluster key: the in-cluster URL of its Prometheus."""
    store: pulumi.Output[dict[str, str]]
    """Where the site's series are kept: `mode`, `write_url` and `query_url`."""
    grafana_url: pulumi.Output[str | None]
    """Grafana's sign-in URL, or None without Grafana."""

    def __init__(self, name: str, args: SiteObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:observability:SiteObservability", name, None, opts)
        config = args.config
        (compute,) = [key for key, ref in args.clusters.items() if ref.role == "compute"]
        self._name = name
        self.releases: dict[str, k8s.helm.v3.Release] = {}
        """The kube-prometheus-stack release of each cluster, by key."""
        grafana = config.grafana and args.gateway is not None
        if config.metrics == "in-cluster":
            write_url = f"http://{config.receiver_vip}:{PROMETHEUS_PORT}/api/v1/write"
            query_url = PROMETHEUS_URL
        else:
            assert config.remote_write is not None
            write_url, query_url = config.remote_write.url, config.remote_write.query_url
        for key, cluster in sorted(args.clusters.items()):
            opts_k = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
            prefix = f"{name}-{key}"
            adopt = Adoption(args.adopt, key)
            own = key == compute
            labels = {ROUTES_LABEL: GATEWAY} if own and grafana else None
            # Kept when the stack is destroyed: deleting the namespace would delete the Prometheus volume with it.
            monitoring = namespace(f"{prefix}-ns-{MONITORING_NAMESPACE}", MONITORING_NAMESPACE,
                                   pulumi.ResourceOptions.merge(opts_k, pulumi.ResourceOptions(retain_on_delete=True)),
                                   labels=labels, adopt=adopt, registry=cluster.registry)
            node_exporter = namespace(f"{prefix}-ns-{NODE_EXPORTER_NAMESPACE}", NODE_EXPORTER_NAMESPACE, opts_k,
                                      privileged_reason=PRIVILEGED_REASON, adopt=adopt, registry=cluster.registry)
            # the Secrets below go in `monitoring`, which must exist first
            after_ns = pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[monitoring])
            needs: list[pulumi.Resource] = [monitoring, node_exporter]
            basic_auth = config.metrics == "remote-write" and config.remote_write is not None and config.remote_write.username
            if basic_auth:
                needs.append(k8s.core.v1.Secret(
                    f"{prefix}-remote-write", metadata={"name": REMOTE_WRITE_SECRET, "namespace": MONITORING_NAMESPACE},
                    type="kubernetes.io/basic-auth",
                    string_data={"username": config.remote_write.username,
                                 "password": pulumi.Output.secret(args.remote_write_password or "")},
                    opts=after_ns,
                ))
            webhook = args.alert_webhook_url is not None and evaluates_rules(cluster.role, config)
            if webhook:
                needs.append(k8s.core.v1.Secret(
                    f"{prefix}-alert-webhook", metadata={"name": ALERT_WEBHOOK_SECRET, "namespace": MONITORING_NAMESPACE},
                    string_data={"url": pulumi.Output.secret(args.alert_webhook_url)}, opts=after_ns,
                ))
            site_ca = False
            if own and grafana:
                needs += self._grafana_secrets(prefix, args, after_ns)
                if args.site_ca is not None:
                    ca = args.site_ca(NamespaceRef(cluster, MONITORING_NAMESPACE, monitoring))
                    needs += ca.resources()
                    site_ca = ca.secret is not None
            values = prometheus_stack_values(
                args.site, cluster, config, own=own, write_url=None if own and config.metrics == "in-cluster" else write_url,
                basic_auth=bool(basic_auth), webhook=webhook,
                grafana=GrafanaSettings.of(args, query_url, site_ca) if own and grafana else None,
            )
            self.releases[key] = release = helm_release(
                f"{prefix}-stack", versions.KUBE_PROMETHEUS_STACK, name=RELEASE, namespace=MONITORING_NAMESPACE, values=values,
                # The chart's objects go in both namespaces; Prometheus, Alertmanager and Grafana read the remote-write,
                # webhook and Grafana Secrets (`needs`) when they start.
                opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=needs), adopt=adopt,
                registry=cluster.registry,
            )
            fence = prometheus_fence(args.query_namespaces, own)
            cilium = args.network.cilium_releases.get(key)
            k8s.apiextensions.CustomResource(
                f"{prefix}-prometheus-fence", api_version=fence["apiVersion"], kind=fence["kind"],
                metadata=fence["metadata"], spec=fence["spec"],
                # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD
                opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider,
                                            depends_on=[monitoring, *([cilium] if cilium else [])]),
            )
            if own and config.metrics == "in-cluster":
                self._receiver(prefix, key, args, opts_k, monitoring)
            if own and grafana:
                http_route(
                    f"{prefix}-route-grafana",
                    # The Gateway's listener (after the controller's chart, which brings the Gateway API CRDs) and the
                    # namespace, not the release: until Grafana's Service has ready pods the route answers 503, as it does
                    # whenever Grafana restarts.
                    pulumi.ResourceOptions(parent=self, provider=cluster.provider, depends_on=[args.gateway, monitoring]),
                    name=GRAFANA.host, namespace_=MONITORING_NAMESPACE, gateway=GATEWAY, listener=GRAFANA.host,
                    hostname=GRAFANA.hostname(args.site.domain),
                    rules=[{"backendRefs": [{"name": GRAFANA.service, "port": GRAFANA.port}]}],
                )
            # ServiceMonitors, PodMonitors and PrometheusRules are custom resources whose CRDs the chart installs (Helm
            # applies a chart's CRDs first), and dashboard ConfigMaps are read by the chart's Grafana sidecar: all wait
            # for the release.
            # The monitors live in `monitoring` (it exists with the release), except one beside the Secrets it presents,
            # which waits for them.
            after_release = pulumi.ResourceOptions(parent=self, provider=cluster.provider,
                                                   depends_on=[release, *args.scrape_secrets.get(key, ())])
            for obj in args.objects.get(key, ()):
                register(f"{prefix}-{logical_suffix(obj)}", obj, after_release)

        self.prometheus = pulumi.Output.from_input({key: PROMETHEUS_URL for key in sorted(args.clusters)})
        self.store = pulumi.Output.from_input({"mode": config.metrics, "write_url": write_url,
                                               "query_url": query_url if config.metrics == "remote-write"
                                               else f"http://{config.receiver_vip}:{PROMETHEUS_PORT}"})
        self.grafana_url = pulumi.Output.from_input(f"https://{GRAFANA.hostname(args.site.domain)}" if grafana else None)
        self.register_outputs({"prometheus": self.prometheus, "store": self.store, "grafana_url": self.grafana_url})

    def _grafana_secrets(self, prefix: str, args: SiteObservabilityArgs, opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        """Grafana's admin (a generated password nobody signs in with: the login form and basic auth are off) and its
        Keycloak client."""
        password = random_secret(f"{prefix}-grafana-admin-password", 32, pulumi.ResourceOptions(parent=self))
        admin = k8s.core.v1.Secret(
            f"{prefix}-grafana-admin", metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": MONITORING_NAMESPACE},
            string_data={"admin-user": "admin", "admin-password": password}, opts=opts,
        )
        client = args.identity.oidc_client("grafana", "browser", [GRAFANA.redirect_uri(args.site.domain)],
                                           description="Grafana sign-in")
        oidc = k8s.core.v1.Secret(
            f"{prefix}-grafana-oidc", metadata={"name": GRAFANA_OIDC_SECRET, "namespace": MONITORING_NAMESPACE},
            string_data={OIDC_CLIENT_ID: client.client_id, OIDC_CLIENT_SECRET: client.client_secret}, opts=opts,
        )
        return [admin, oidc]

    def _receiver(self, prefix: str, key: str, args: SiteObservabilityArgs, opts: pulumi.ResourceOptions,
                  monitoring: pulumi.Resource) -> None:
        """compute's Prometheus at the receiver VIP, for the other clusters' remote writes.

        A Service of its own, not the chart's: a release waits for its LoadBalancer Services, and this one waits for its
        pool too (as the ClusterMesh API server's does). `Local` keeps the writers' pod addresses, which the flow
        `metrics` admits by cluster; behind `Cluster` they would arrive from a node's address and be denied.
        """
        assert args.receiver_pool is not None
        k8s.core.v1.Service(
            f"{prefix}-receiver",
            metadata={
                "name": RECEIVER_SERVICE,
                "namespace": MONITORING_NAMESPACE,
                "labels": args.network.lb_service_labels(key, args.receiver_pool),
                "annotations": {"lbipam.cilium.io/ips": str(args.config.receiver_vip)},
            },
            spec={
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "selector": {**PROMETHEUS_POD_LABELS, "operator.prometheus.io/name": PROMETHEUS_SERVICE},
                "ports": [{"name": "http-web", "port": PROMETHEUS_PORT, "targetPort": PROMETHEUS_PORT, "protocol": "TCP"}],
            },
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                # LB-IPAM assigns the VIP from the receiver pool, in the namespace `monitoring`. Not the release: the
                # Service selects Prometheus' pods by label, and Pulumi waits for its endpoints by itself.
                depends_on=[monitoring, args.network.lb_pool(key, args.receiver_pool)])),
        )


PROMETHEUS_FENCE = "prometheus"
GRAFANA_POD_LABELS = {"app.kubernetes.io/name": "grafana"}
"""Grafana's pods (the kube-prometheus-stack's grafana subchart)."""


def prometheus_fence(query_namespaces: Sequence[str] = (), compute: bool = True) -> dict[str, Any]:
    """Every cluster's Prometheus answers queries without authentication (compute's, while the site's metrics are
    in-cluster, takes remote writes too), on one port: the CiliumNetworkPolicy that refuses it to every pod of its
    cluster but Prometheus itself, the pods of `query_namespaces` (fabctl verify's) and, on compute, Grafana (its
    queries). The other clusters' Prometheus write to compute's through the flow `metrics`, which admits their Prometheus
    pods alone, and their own Prometheus only scrapes and writes out; a team's pod neither writes series nor reads them
    (other teams' series among them) on any cluster."""
    app = "app.kubernetes.io/name"
    own = {PROMETHEUS_POD_LABELS[app], *([GRAFANA_POD_LABELS[app]] if compute else [])}
    sources: dict[str, dict[str, list[str]]] = {MONITORING_NAMESPACE: {app: sorted(own)}, **{ns: {} for ns in query_namespaces}}
    description = ("compute's Prometheus: remote writes come from the Prometheus of the site (flow metrics), queries from "
                   "Grafana and the acceptance jobs." if compute else
                   "The cluster's Prometheus: it scrapes and writes out; only the acceptance jobs query it.")
    return fence_policy(PROMETHEUS_FENCE, MONITORING_NAMESPACE, description, dict(PROMETHEUS_POD_LABELS), sources)


def evaluates_rules(role: str, config: ObservabilityConfig) -> bool:
    """Whether a cluster's Prometheus evaluates alert and recording rules and runs an Alertmanager: where the series the
    rules read are. In-cluster that is compute's alone, which holds the whole site's series (another cluster's own rules
    would be evaluated twice, and its recorded series would arrive by remote write beside compute's copy); with the
    site's store, every cluster's, on its own series."""
    return config.metrics == "remote-write" or role == "compute"


def cluster_manifests(scopes: Mapping[str, MetricsScope], config: ObservabilityConfig) -> dict[str, list[dict[str, Any]]]:
    """What every cluster's Prometheus is given, by cluster key: the scrape targets of what runs there
    (components/monitors.py), the alert rules of every cluster whose series it evaluates (components/alerts.py: its own,
    or in-cluster on compute every cluster's) and, on compute while Grafana is on, the dashboards
    (components/dashboards.py)."""
    # Imported here (and in `prometheus_stack_values`): the Grafana SDK costs a render ~30 ms, and only a site with
    # observability builds dashboards.
    from components.dashboards import dashboards

    (compute,) = [key for key, scope in scopes.items() if scope.role == "compute"]
    rules: dict[str, list[dict[str, Any]]] = {key: [] for key in scopes}
    for key, scope in sorted(scopes.items()):
        rules[key if evaluates_rules(scope.role, config) else compute] += alert_rules(scope, config.alerts)
    return {
        key: [
            *scrape_targets(scope),
            *rules[key],
            *(dashboards(MONITORING_NAMESPACE) if scope.role == "compute" and config.grafana else []),
        ]
        for key, scope in sorted(scopes.items())
    }


SHORT_KINDS = {"ServiceMonitor": "servicemonitor", "PodMonitor": "podmonitor", "PrometheusRule": "rule", "ConfigMap": "dashboard"}


def logical_suffix(obj: dict[str, Any]) -> str:
    """Logical-name suffix of a registered manifest: its kind and metadata.name (a namespace too where one is given, since
    monitors of the same name may live in several namespaces), never a position."""
    meta = obj["metadata"]
    kind = SHORT_KINDS.get(obj["kind"], obj["kind"].lower())
    ns = meta.get("namespace")
    return f"{kind}-{ns}-{meta['name']}" if ns and ns != MONITORING_NAMESPACE else f"{kind}-{meta['name']}"


def register(logical: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """A manifest as a Pulumi resource: a ConfigMap as itself, a monitoring custom resource by its spec."""
    if obj["kind"] == "ConfigMap":
        return k8s.core.v1.ConfigMap(logical, metadata=obj["metadata"], data=obj.get("data"), opts=opts)
    return k8s.apiextensions.CustomResource(logical, api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"],
                                            spec=obj["spec"], opts=opts)


@dataclass(frozen=True)
class GrafanaSettings:
    """What compute's Grafana is configured from: its host, the realm's issuer, who may sign in, its data source."""

    domain: str
    issuer: str
    admin_group: str
    viewer_groups: tuple[str, ...]
    query_url: str
    remote_store: bool
    """The data source is the site's store (`metrics: remote-write`), not compute's own Prometheus."""
    basic_auth_user: str | None
    """The store's user while the data source is the site's store with basic authentication."""
    site_ca: bool = False
    """The site has its own CA (`ca_bundle`), delivered to the monitoring namespace: the sign-in's calls to the realm
    (token, userinfo) verify Keycloak against it (`tls_client_ca`)."""

    @classmethod
    def of(cls, args: SiteObservabilityArgs, query_url: str, site_ca: bool = False) -> GrafanaSettings:
        remote = args.config.remote_write if args.config.metrics == "remote-write" else None
        return cls(domain=args.site.domain, issuer=args.identity.issuer, admin_group=PLATFORM_ADMINS,
                   viewer_groups=tuple(names.TEAM_GROUP(team) for team in sorted(args.teams)), query_url=query_url,
                   remote_store=args.config.metrics == "remote-write", basic_auth_user=remote.username if remote else None,
                   site_ca=site_ca)

    def role_attribute_path(self) -> str:
        """JMESPath over the token's `groups`: platform admins are Admin, team members Viewer, anyone else is refused
        (`role_attribute_strict`)."""
        viewers = " || ".join(f"contains(groups[*], '{group}')" for group in self.viewer_groups) or "`false`"
        return f"contains(groups[*], '{self.admin_group}') && 'Admin' || ({viewers}) && 'Viewer'"


def grafana_values(settings: GrafanaSettings) -> dict[str, Any]:
    """The Grafana subchart: Keycloak sign-in only (PKCE, roles from groups), the admin from a Secret, one Prometheus data
    source, the dashboards sidecar on the monitoring namespace, on the interactive pool."""
    oidc = f"{settings.issuer}/protocol/openid-connect"
    remote_store = settings.remote_store
    datasources: dict[str, Any] = {
        "enabled": True,
        # In-cluster, the chart's own data source is compute's Prometheus; otherwise the site's store replaces it.
        "defaultDatasourceEnabled": not remote_store,
    }
    values: dict[str, Any] = {
        "enabled": True,
        "fullnameOverride": GRAFANA.service,
        "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
        "grafana.ini": {
            "server": {"domain": f"{GRAFANA.host}.{settings.domain}", "root_url": f"https://{GRAFANA.host}.{settings.domain}"},
            "auth": {"disable_login_form": True},
            "auth.basic": {"enabled": False},
            "auth.anonymous": {"enabled": False},
            "users": {"allow_sign_up": False},
            "auth.generic_oauth": {
                "enabled": True,
                "auto_login": True,
                "name": "Keycloak",
                "allow_sign_up": True,
                "use_pkce": True,
                "scopes": "openid profile email groups",
                "auth_url": f"{oidc}/auth",
                "token_url": f"{oidc}/token",
                "api_url": f"{oidc}/userinfo",
                "signout_redirect_url": f"{oidc}/logout",
                "groups_attribute_path": "groups",
                "role_attribute_path": settings.role_attribute_path(),
                "role_attribute_strict": True,
                "allow_assign_grafana_admin": False,
            },
            "analytics": {"check_for_updates": False, "reporting_enabled": False},
        },
        # The client's id and secret come from its Secret (SiteIdentity's client), never from values.
        "envValueFrom": {
            "GF_AUTH_GENERIC_OAUTH_CLIENT_ID": {"secretKeyRef": {"name": GRAFANA_OIDC_SECRET, "key": OIDC_CLIENT_ID}},
            "GF_AUTH_GENERIC_OAUTH_CLIENT_SECRET": {"secretKeyRef": {"name": GRAFANA_OIDC_SECRET, "key": OIDC_CLIENT_SECRET}},
            **({"METRICS_STORE_PASSWORD": {"secretKeyRef": {"name": REMOTE_WRITE_SECRET, "key": "password"}}}
               if settings.basic_auth_user else {}),
        },
        "sidecar": {
            "dashboards": {
                "enabled": True,
                "label": GRAFANA_DASHBOARD_LABEL[0],
                "labelValue": GRAFANA_DASHBOARD_LABEL[1],
                "searchNamespace": MONITORING_NAMESPACE,
                # Every series carries its cluster: the chart's dashboards get a cluster selector.
                "multicluster": {"global": {"enabled": True}},
            },
            "datasources": datasources,
            "resources": _resources("50m", "128Mi", "200m", "256Mi"),
            "securityContext": CONTAINER_SECURITY,
        },
        "testFramework": {"enabled": False},
        "securityContext": {"runAsNonRoot": True, "runAsUser": GRAFANA_USER, "runAsGroup": GRAFANA_USER, "fsGroup": GRAFANA_USER,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containerSecurityContext": CONTAINER_SECURITY,
        "resources": _resources("100m", "256Mi", "1", "1Gi"),
        **INTERACTIVE.placement(),
    }
    if settings.site_ca:
        # Grafana's OAuth client trusts the CAs of the file `tls_client_ca` names (Grafana's generic OAuth settings).
        values["grafana.ini"]["auth.generic_oauth"]["tls_client_ca"] = SITE_CA_FILE
        values["extraSecretMounts"] = [{"name": "site-ca", "secretName": SITE_CA_SECRET, "mountPath": SITE_CA_DIR, "readOnly": True}]
    if remote_store:
        source: dict[str, Any] = {
            "name": "Prometheus", "uid": "prometheus", "type": "prometheus", "access": "proxy", "url": settings.query_url,
            "isDefault": True, "jsonData": {"httpMethod": "POST"},
        }
        if settings.basic_auth_user:
            # Grafana expands the variable when it provisions the source; the password stays in the Secret.
            source.update(basicAuth=True, basicAuthUser=settings.basic_auth_user,
                          secureJsonData={"basicAuthPassword": "$__env{METRICS_STORE_PASSWORD}"})
        values["additionalDataSources"] = [source]
    return values


def prometheus_stack_values(site: SiteRef, cluster: ClusterRef, config: ObservabilityConfig, *, own: bool, write_url: str | None,
                            basic_auth: bool, webhook: bool, grafana: GrafanaSettings | None) -> dict[str, Any]:
    """Helm values of kube-prometheus-stack 88.5.3 on one cluster.

    `own`: the cluster is compute (the receiver while metrics is in-cluster, and Grafana's). `write_url`: where this
    Prometheus remote-writes, or None (compute's, in-cluster: it is the store). `basic_auth`: the store wants the user and
    password of REMOTE_WRITE_SECRET. `webhook`: Alertmanager sends to the URL in ALERT_WEBHOOK_SECRET. `grafana`: Grafana's settings on compute while it is on, else None.
    """
    from components.dashboards import ksm_metric_labels_allowlist  # deferred: see `cluster_manifests`

    identity = {"site": site.name, "cluster": cluster.name}
    evaluates = evaluates_rules(cluster.role, config)
    remote_write: list[dict[str, Any]] = []
    if write_url is not None:
        target: dict[str, Any] = {"name": "site", "url": write_url}
        if basic_auth:
            target["basicAuth"] = {"username": {"name": REMOTE_WRITE_SECRET, "key": "username"},
                                   "password": {"name": REMOTE_WRITE_SECRET, "key": "password"}}
        if not evaluates:
            target["writeRelabelConfigs"] = [{"sourceLabels": ["__name__"], "regex": NOT_FORWARDED, "action": "drop"}]
        remote_write.append(target)
    receiver = ({"name": "webhook", "webhook_configs": [{"url_file": ALERT_WEBHOOK_FILE, "send_resolved": True}]} if webhook
                else {"name": "null"})
    return {
        "fullnameOverride": RELEASE,
        "crds": {"enabled": True},
        "windowsMonitoring": {"enabled": False},
        # The chart's rules group by `cluster` (and `defaultRules.additionalAggregationLabels`, none here: `site` is the
        # same on every series of a Prometheus), so compute's evaluate each cluster's series apart.
        "defaultRules": {"create": evaluates, "rules": dict.fromkeys(DISABLED_RULES, False)},
        **{target: {"enabled": False} for target in DISABLED_TARGETS},
        "prometheusOperator": {
            "resources": _resources("100m", "128Mi", "500m", "512Mi"),
            "containerSecurityContext": CONTAINER_SECURITY,
            "prometheusConfigReloader": {"resources": _resources("10m", "32Mi", "100m", "64Mi")},
            "admissionWebhooks": {"patch": {"resources": _resources("10m", "32Mi", "100m", "128Mi")}},
        },
        "prometheus": {
            "prometheusSpec": {
                # Every series is labelled with its site and cluster: as external labels for what leaves the cluster
                # (remote write, alerts), and on every scrape, so that compute's own series carry them as well.
                "externalLabels": identity,
                "scrapeClasses": [{"name": "site", "default": True, "relabelings": [
                    {"targetLabel": label, "replacement": value, "action": "replace"} for label, value in identity.items()
                ]}],
                "retention": f"{config.retention_days}d",
                "enableRemoteWriteReceiver": own and config.metrics == "in-cluster",
                "remoteWrite": remote_write,
                # Every ServiceMonitor, PodMonitor and PrometheusRule of the cluster, in any namespace, without a label.
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "ruleSelectorNilUsesHelmValues": False,
                "probeSelectorNilUsesHelmValues": False,
                "scrapeConfigSelectorNilUsesHelmValues": False,
                "storageSpec": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{config.storage_gib}Gi"}},
                }}},
                # The series outlive the release: its StatefulSet leaves the volume behind when deleted or scaled down.
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
                # compute's keeps the whole site's series while metrics is in-cluster.
                "resources": _resources("1", "4Gi", "4", "16Gi") if own and config.metrics == "in-cluster"
                else _resources("500m", "2Gi", "2", "8Gi"),
            },
        },
        "alertmanager": {
            "config": {
                "route": {"receiver": receiver["name"], "group_by": ["cluster", "namespace"], "routes": [
                    {"receiver": "null", "matchers": ['alertname = "Watchdog"']},
                ]},
                "receivers": [receiver, *([{"name": "null"}] if webhook else [])],
                "inhibit_rules": INHIBIT_RULES,
            },
            "alertmanagerSpec": {
                "resources": _resources("50m", "64Mi", "200m", "256Mi"),
                "secrets": [ALERT_WEBHOOK_SECRET] if webhook else [],
                # Silences and the notification log survive a restart (an emptyDir would forget them).
                "storage": {"volumeClaimTemplate": {"spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": f"{ALERTMANAGER_STORAGE_GIB}Gi"}},
                }}},
            },
        } if evaluates else {"enabled": False},
        "kube-state-metrics": {
            # The GPU pool and type of every node, the team of every namespace and the profile of every switch CronJob,
            # as labels of kube_node_labels, kube_namespace_labels and kube_cronjob_labels: the dashboards group by them.
            "metricLabelsAllowlist": ksm_metric_labels_allowlist(),
            "resources": _resources("50m", "128Mi", "500m", "512Mi"),
        },
        "nodeExporter": {"enabled": True, "operatingSystems": {"aix": {"enabled": False}, "darwin": {"enabled": False}}},
        "prometheus-node-exporter": {
            "namespaceOverride": NODE_EXPORTER_NAMESPACE,
            # On every node: GPU nodes' pool taints and compute's pool taints included.
            "tolerations": [{"operator": "Exists"}],
            "resources": _resources("50m", "64Mi", "250m", "256Mi"),
            "containerSecurityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                         "capabilities": {"drop": ["ALL"]}},
        },
        "grafana": grafana_values(grafana) if grafana is not None else {"enabled": False},
    }
