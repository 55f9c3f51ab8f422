"""Scrape targets of the metrics stack (issue 19, "Metrics"): the ServiceMonitors and PodMonitors of what the platform
runs on each cluster, as pure builders the metrics component registers once kube-prometheus-stack (and with it the
monitoring.coreos.com CRDs) is installed.

Each monitor lives in `monitoring` (AIStor's beside the Secrets it presents), selects the namespace of what it scrapes,
and matches the labels and port names the program's objects
and the pinned charts and operators create (checked against a render in tests/components/test_monitors.py). `METRICS`
names every series the alert rules (components/alerts.py) and the dashboards read, with what exports it. Last, the flow
the metrics stack opens: every other cluster's Prometheus remote-writes to compute's (components/observability.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from components import versions
from components.config import Flow, names
from components.config.fields import GPU_ROLES
from components.config.views import METRICS_FLOW, metrics_in_cluster
from components.constants import (
    AISTOR_METRICS_TOKEN_KEY,
    AISTOR_METRICS_TOKEN_SECRET,
    ENGINE_LABEL,
    GATEWAY_NAMESPACE,
    GPU_OPERATOR_NAMESPACE,
    KUEUE_NAMESPACE,
    MODEL_LABEL,
    MONITORING_NAMESPACE,
    PROMETHEUS_POD_LABELS,
    PROMETHEUS_PORT,
)
from components.metrics_sources import (
    AISTOR_BUCKET_METRICS_PATH,
    AISTOR_METRICS_PATH,
    CILIUM_AGENT_POD_LABELS,
    CILIUM_NAMESPACE,
    CILIUM_OPERATOR_POD_LABELS,
    CNPG_CLUSTER_LABEL,
    CNPG_METRICS_PORT,
    DCGM_EXPORTER_SERVICE_LABELS,
    ENVOY_PROXY_POD_LABELS,
    KUEUE_METRICS_SERVICE_LABELS,
    OWNING_GATEWAY_LABEL,
    POLARIS_MANAGEMENT_PORT,
    RATE_LIMIT_POD_LABELS,
    SPARK_OPERATOR_NAMESPACE,
    SPARK_OPERATOR_POD_LABELS,
    STARROCKS_COMPONENT_LABEL,
    STARROCKS_OWNER_LABEL,
    VLLM_POD_LABELS,
)

if TYPE_CHECKING:
    from components.config.site import SiteConfig

MONITORING_API = versions.PROMETHEUS_OPERATOR_API
"""API version of every ServiceMonitor, PodMonitor and PrometheusRule (monitoring.coreos.com/v1)."""
MONITOR_LABELS = {"app.kubernetes.io/part-of": "fab-platform", "app.kubernetes.io/component": "metrics"}
"""On every monitor and rule the program creates: what `kubectl get servicemonitors,podmonitors,prometheusrules -A -l`
lists as the platform's own."""
SCRAPE_INTERVAL = "30s"

METRICS: dict[str, str] = {
    # GPUs: the GPU Operator's DCGM exporter (default counters of dcgm-exporter 4.4.2-4.7.0); labels gpu, UUID,
    # modelName, Hostname (the node), and the namespace/pod/container of the pod using the GPU, which arrive as
    # exported_namespace/exported_pod/exported_container (the program's ServiceMonitor does not honour exported labels).
    "DCGM_FI_DEV_GPU_UTIL": "dcgm-exporter (GPU Operator ClusterPolicy), %",
    "DCGM_FI_DEV_FB_USED": "dcgm-exporter, MiB",
    "DCGM_FI_DEV_GPU_TEMP": "dcgm-exporter, one series per GPU: the GPU count of a node",
    "DCGM_FI_DEV_XID_ERRORS": "dcgm-exporter, value of the last XID error",
    # Queues: Kueue 0.19.2 (pkg/metrics/metrics.go); label cluster_queue (and cohort, flavor, resource).
    "kueue_pending_workloads": "Kueue, per cluster_queue and status (active, inadmissible)",
    "kueue_admitted_workloads_total": "Kueue, per cluster_queue",
    "kueue_admitted_active_workloads": "Kueue, per cluster_queue",
    "kueue_cluster_queue_resource_usage": "Kueue (metrics.enableClusterQueueResources), per cluster_queue, flavor, resource",
    "kueue_cluster_queue_nominal_quota": "Kueue (metrics.enableClusterQueueResources), per cluster_queue, flavor, resource",
    # Inference: vLLM's OpenAI server /metrics; label model_name, and `model` (the config key) from the pod label.
    "vllm:num_requests_running": "vLLM",
    "vllm:num_requests_waiting": "vLLM",
    "vllm:prompt_tokens_total": "vLLM",
    "vllm:generation_tokens_total": "vLLM",
    # Gateways: Envoy proxies' /stats/prometheus; label `gateway` from the proxy pod's owning Gateway.
    "envoy_http_downstream_rq_xx": "Envoy (Envoy Gateway proxy), per envoy_http_conn_manager_prefix, envoy_response_code_class",
    "envoy_http_downstream_rq_total": "Envoy (Envoy Gateway proxy)",
    "envoy_server_days_until_first_cert_expiring": "Envoy (Envoy Gateway proxy): its soonest-expiring certificate",
    # Per-team limits: Envoy Gateway's rate limit service (envoyproxy/ratelimit); labels domain, key1, key2.
    "ratelimit_service_rate_limit_total_hits": "envoy-ratelimit",
    "ratelimit_service_rate_limit_near_limit": "envoy-ratelimit: hits above NEAR_LIMIT_RATIO of a limit",
    "ratelimit_service_rate_limit_over_limit": "envoy-ratelimit: hits refused",
    # Network: Hubble (metrics_sources.HUBBLE_METRICS) and the Cilium agent.
    "hubble_drop_total": "Hubble, per reason, protocol, source and destination identity (with their clusters)",
    # Catalog database: CloudNativePG's instance exporter (1.30).
    "cnpg_collector_last_available_backup_timestamp": "CloudNativePG, Unix time of the newest backup (0 without one)",
    # Replication copies: kube-state-metrics (kube-prometheus-stack) on the replication CronJobs.
    "kube_cronjob_status_last_successful_time": "kube-state-metrics, per namespace, cronjob",
    # Read by the dashboards (components/dashboards.py).
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "dcgm-exporter: ratio of time the graphics engine is active",
    "kube_node_labels": "kube-state-metrics: node labels, the GPU pool and type allow-listed (dashboards.KSM_LABELS)",
    "kube_namespace_labels": "kube-state-metrics: namespace labels, the team allow-listed",
    "kube_cronjob_labels": "kube-state-metrics: CronJob labels, the profile a switch applies allow-listed",
    "kueue_admission_wait_time_seconds_bucket": "Kueue: time from creation or requeue to admission, per cluster_queue",
    "kueue_evicted_workloads_total": "Kueue: evictions per cluster_queue and reason (Preempted, ...)",
    "vllm:e2e_request_latency_seconds_bucket": "vLLM: end-to-end request latency",
    "vllm:time_to_first_token_seconds_bucket": "vLLM: time to first token",
    "vllm:inter_token_latency_seconds_bucket": "vLLM: time between output tokens",
    "vllm:request_success_total": "vLLM: finished requests per finished_reason",
    "vllm:kv_cache_usage_perc": "vLLM: KV cache usage, ratio",
    "envoy_cluster_upstream_rq_xx": "Envoy proxy (Envoy Gateway): responses per upstream cluster (httproute/<ns>/<route>/rule/<n>) "
    "and envoy_response_code_class",
    # AIStor metrics v3 /bucket/api (every bucket, AISTOR_BUCKET_METRICS_PATH). Its help texts have sent
    # and received the wrong way round; the names are right: received = written to AIStor, sent = read from it.
    "minio_bucket_api_traffic_received_bytes": "AIStor: bytes received per bucket (uploads)",
    "minio_bucket_api_traffic_sent_bytes": "AIStor: bytes sent per bucket (downloads)",
    "minio_bucket_api_total": "AIStor: S3 requests per bucket and API name",
    "node_infiniband_port_transmit_wait_total": "node-exporter (infiniband collector): PortXmitWait ticks per HCA device and "
    "port, the fabric's congestion counter",
    "node_infiniband_port_data_transmitted_bytes_total": "node-exporter (infiniband collector): bytes sent per HCA device and port",
    "container_network_receive_bytes_total": "cAdvisor (kubelet): bytes received per pod network interface",
    "container_network_transmit_bytes_total": "cAdvisor (kubelet): bytes sent per pod network interface",
}
"""Every series the platform's alert rules and dashboards read, with what exports it (and its main labels)."""


@dataclass(frozen=True)
class MetricsScope:
    """What runs on one cluster, as its monitors and alert rules need it."""

    site: str
    cluster: str
    """The cluster key."""
    role: str
    gpu_nodes: dict[str, int] = field(default_factory=dict)
    """GPU node -> GPUs it has, per config (every node of a gpu or gpu-train cluster)."""
    kueue: bool = False
    cilium: bool = False
    """Cilium is installed by the program (so its metrics are on)."""
    models: tuple[str, ...] = ()
    """Models it serves (the inference cluster)."""
    gateways: tuple[str, ...] = ()
    """Envoy Gateway Gateways in envoy-gateway-system: the inference gateway, the compute ingress."""
    global_rate_limits: bool = False
    """Envoy Gateway's rate limit service runs (the inference gateway's per-team limits)."""
    requests_per_minute: dict[str, int] = field(default_factory=dict)
    """Team -> requests per minute to each model (the inference cluster): the default under `*`, and the exceptions."""
    spark: bool = False
    starrocks: bool = False
    polaris: bool = False
    polaris_namespace: str = "polaris"
    aistor: bool = False
    aistor_namespace: str = "aistor"
    aistor_pod_labels: dict[str, str] = field(default_factory=dict)
    aistor_port: int = 9000
    aistor_tls: bool = True
    site_ca: bool = False
    """The site has its own PKI (`ca_bundle`): AIStor's certificate is verified against it (the Secret `fab-site-ca`)."""
    s3_host: str = ""
    replicates_to: tuple[str, ...] = ()
    """Sites this (storage) cluster's copy jobs replicate buckets to."""

    @property
    def name(self) -> str:
        """The cluster's name (`<site>-<key>`, ClusterRef.name): the `cluster` label of every series it sends."""
        return names.CLUSTER_NAME(self.cluster, self.site)


def metrics_scopes(site: SiteConfig) -> dict[str, MetricsScope]:
    """Every cluster's scope, by cluster key."""
    from components.engines import GATEWAY
    from components.serving import GATEWAY_NAME

    inference = site.inference
    kueue = set(site.kueue_clusters())
    compute = site.compute
    store = site.storage.object_store
    ui_engines = compute.trino.enabled or compute.starrocks.enabled or compute.superset.enabled or compute.jupyterhub.enabled
    scopes = {}
    for key, cluster in sorted(site.clusters.items()):
        role = cluster.role
        gateways: list[str] = []
        scope: dict[str, Any] = {"site": site.name, "cluster": key, "role": role, "kueue": key in kueue,
                                 "cilium": cluster.cilium.managed}
        if role in GPU_ROLES and key in site.gpu:
            scope["gpu_nodes"] = {node: spec.gpus for node, spec in sorted(site.gpu[key].nodes.items())}
        if inference is not None and inference.cluster == key:
            gateways.append(GATEWAY_NAME)
            scope["models"] = tuple(sorted(inference.models))
            scope["global_rate_limits"] = True
            scope["requests_per_minute"] = {"*": inference.requests_per_minute, **dict(sorted(inference.team_requests_per_minute.items()))}
        if role == "compute":
            if ui_engines or compute.airflow.enabled or compute.argocd.enabled:
                gateways.append(GATEWAY)
            # Trino is not scraped: its HTTP port asks every caller for OAuth2, and its JMX exporter needs an
            # unauthenticated RMI server in the pod (docs/operations.md, "Alerts").
            scope.update(spark=compute.spark.enabled, starrocks=compute.starrocks.enabled)
        if role == "storage":
            consumers = site.federation.consumers
            scope.update(
                polaris=True, polaris_namespace=site.storage.polaris.namespace,
                aistor=True, aistor_namespace=store.namespace, aistor_pod_labels=store.s3_pod_labels,
                aistor_port=store.s3_port, aistor_tls=store.tls, s3_host=names.S3_HOST(site.domain), site_ca=site.ca_bundle is not None,
                replicates_to=tuple(sorted(c for c, spec in consumers.items() if site.replicates_gold(c) or spec.replicate_models)),
            )
        scope["gateways"] = tuple(sorted(gateways))
        scopes[key] = MetricsScope(**scope)
    return scopes


def _meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(MONITOR_LABELS)}


def _relabel_pod_label(label: str, target: str) -> dict[str, Any]:
    """Copy a pod label onto every series of the target as `target`."""
    return {"action": "replace", "sourceLabels": [f"__meta_kubernetes_pod_label_{_sanitize(label)}"], "targetLabel": target}


NODE_RELABEL = {"action": "replace", "sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}


def _sanitize(label: str) -> str:
    """A Kubernetes label key as Prometheus's service discovery spells it (every other character becomes `_`)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in label)


def pod_monitor(name: str, namespace: str, selector: dict[str, Any], endpoints: list[dict[str, Any]],
                beside: bool = False) -> dict[str, Any]:
    """A PodMonitor of the pods `selector` picks in `namespace`. It lives in `monitoring`, which exists once the chart does,
    so it waits for nothing else; `beside`: in `namespace` itself, where the Secrets its endpoints present are."""
    return {
        "apiVersion": MONITORING_API, "kind": "PodMonitor", "metadata": _meta(name, namespace if beside else MONITORING_NAMESPACE),
        "spec": {"selector": selector, "namespaceSelector": {"matchNames": [namespace]}, "podMetricsEndpoints": endpoints},
    }


def service_monitor(name: str, namespace: str, selector: dict[str, Any], endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    """A ServiceMonitor of the Services `selector` picks in `namespace`, living in `monitoring` (as a PodMonitor)."""
    return {
        "apiVersion": MONITORING_API, "kind": "ServiceMonitor", "metadata": _meta(name, MONITORING_NAMESPACE),
        "spec": {"selector": selector, "namespaceSelector": {"matchNames": [namespace]}, "endpoints": endpoints},
    }


def target_namespace(monitor: dict[str, Any]) -> str:
    """The namespace whose pods or Services a monitor scrapes."""
    (namespace,) = monitor["spec"]["namespaceSelector"]["matchNames"]
    return namespace


def _endpoint(port: str | int, path: str = "/metrics", **more: Any) -> dict[str, Any]:
    where = {"portNumber": port} if isinstance(port, int) else {"port": port}
    return {**where, "path": path, "interval": SCRAPE_INTERVAL, **more}


def _vllm() -> dict[str, Any]:
    from components.gpu import INFERENCE_NAMESPACE

    return pod_monitor("vllm", INFERENCE_NAMESPACE, {"matchLabels": VLLM_POD_LABELS},
                       [_endpoint("http", relabelings=[_relabel_pod_label(MODEL_LABEL, "model")])])


def _envoy_proxies() -> dict[str, Any]:
    return pod_monitor("envoy-proxies", GATEWAY_NAMESPACE, {"matchLabels": ENVOY_PROXY_POD_LABELS},
                       [_endpoint("metrics", "/stats/prometheus", relabelings=[_relabel_pod_label(OWNING_GATEWAY_LABEL, "gateway")])])


def _rate_limit() -> dict[str, Any]:
    return pod_monitor("envoy-ratelimit", GATEWAY_NAMESPACE, {"matchLabels": RATE_LIMIT_POD_LABELS}, [_endpoint("metrics")])


def _kueue() -> dict[str, Any]:
    # The metrics endpoint authenticates the caller's token and authorizes GET /metrics (Prometheus's ClusterRole
    # has it). Its certificate is Kueue's own self-signed one, with no CA to pin: the chart's monitor skips
    # verification the same way; the token is only ever sent inside the cluster.
    return service_monitor("kueue", KUEUE_NAMESPACE, {"matchLabels": KUEUE_METRICS_SERVICE_LABELS}, [_endpoint(
        "https", scheme="https", bearerTokenFile="/var/run/secrets/kubernetes.io/serviceaccount/token",
        tlsConfig={"insecureSkipVerify": True},
    )])


def _dcgm_exporter() -> dict[str, Any]:
    """The DCGM exporter's ServiceMonitor, the program's rather than the ClusterPolicy's: registered after the chart that
    installs its CRD, where the GPU Operator may reconcile before the CRD exists. Exported labels are not honoured: the
    pod a GPU is allocated to arrives as `exported_namespace`/`exported_pod`, the exporter's own as `namespace`/`pod`."""
    monitor = service_monitor("dcgm-exporter", GPU_OPERATOR_NAMESPACE, {"matchLabels": DCGM_EXPORTER_SERVICE_LABELS},
                              [_endpoint("gpu-metrics", honorLabels=False)])
    monitor["spec"]["jobLabel"] = "app"
    return monitor


def _spark_operator() -> dict[str, Any]:
    return pod_monitor("spark-operator", SPARK_OPERATOR_NAMESPACE, {"matchLabels": SPARK_OPERATOR_POD_LABELS}, [_endpoint("metrics")])


def _starrocks() -> dict[str, Any]:
    from components.engines.starrocks import CLUSTER, ENGINE

    selector = {"matchExpressions": [
        {"key": STARROCKS_COMPONENT_LABEL, "operator": "In", "values": ["cn", "fe"]},
        {"key": STARROCKS_OWNER_LABEL, "operator": "In", "values": [f"{CLUSTER}-cn", f"{CLUSTER}-fe"]},
    ]}
    relabel = [_relabel_pod_label(STARROCKS_COMPONENT_LABEL, "component")]
    return pod_monitor("starrocks", ENGINE.namespace, selector,
                       [_endpoint("http-port", relabelings=relabel), _endpoint("webserver-port", relabelings=relabel)])


def _polaris(namespace: str) -> dict[str, Any]:
    from components.polaris import POLARIS_POD_LABELS

    return pod_monitor("polaris", namespace, {"matchLabels": POLARIS_POD_LABELS}, [_endpoint(POLARIS_MANAGEMENT_PORT, "/q/metrics")])


def _postgres(namespace: str) -> dict[str, Any]:
    from components.polaris import POLARIS_DB

    return pod_monitor("polaris-db", namespace, {"matchLabels": {CNPG_CLUSTER_LABEL: POLARIS_DB}},
                       [_endpoint(CNPG_METRICS_PORT, relabelings=[_relabel_pod_label(CNPG_CLUSTER_LABEL, "pg_cluster")])])


def _aistor(scope: MetricsScope) -> dict[str, Any]:
    from components.constants import SITE_CA_KEY, SITE_CA_SECRET
    from components.object_store import METRICS_ENGINE

    more: dict[str, Any] = {
        "scheme": "https" if scope.aistor_tls else "http",
        "authorization": {"type": "Bearer", "credentials": {"name": AISTOR_METRICS_TOKEN_SECRET, "key": AISTOR_METRICS_TOKEN_KEY}},
    }
    if scope.aistor_tls:
        # Pods are reached by address; their certificate names the S3 host, issued by the site's PKI where it has one
        # (delivered beside the token by the storage component), else by a CA the system trusts.
        more["tlsConfig"] = {"serverName": scope.s3_host}
        if scope.site_ca:
            more["tlsConfig"]["ca"] = {"secret": {"name": SITE_CA_SECRET, "key": SITE_CA_KEY}}
    endpoints = [_endpoint(scope.aistor_port, AISTOR_METRICS_PATH, **more)]
    endpoints.append(_endpoint(scope.aistor_port, AISTOR_BUCKET_METRICS_PATH, **more))
    monitor = pod_monitor("aistor", scope.aistor_namespace, {"matchLabels": dict(scope.aistor_pod_labels)}, endpoints, beside=True)
    # Scrapes as the metrics principal, whose token it presents (fab-engine-reads-own-credentials).
    monitor["metadata"]["labels"][ENGINE_LABEL] = METRICS_ENGINE
    return monitor


def _cilium() -> list[dict[str, Any]]:
    return [
        pod_monitor("cilium-agent", CILIUM_NAMESPACE, {"matchLabels": CILIUM_AGENT_POD_LABELS}, [
            _endpoint("prometheus", relabelings=[NODE_RELABEL]),
            _endpoint("hubble-metrics", relabelings=[NODE_RELABEL]),
        ]),
        pod_monitor("cilium-operator", CILIUM_NAMESPACE, {"matchLabels": CILIUM_OPERATOR_POD_LABELS}, [_endpoint("prometheus")]),
    ]


def scrape_targets(scope: MetricsScope) -> list[dict[str, Any]]:
    """The ServiceMonitors and PodMonitors of one cluster (the DCGM exporter's comes with the GPU Operator's ClusterPolicy)."""
    targets: list[dict[str, Any]] = []
    if scope.cilium:
        targets += _cilium()
    if scope.gpu_nodes:
        targets.append(_dcgm_exporter())
    if scope.kueue:
        targets.append(_kueue())
    if scope.models:
        targets.append(_vllm())
    if scope.gateways:
        targets.append(_envoy_proxies())
    if scope.global_rate_limits:
        targets.append(_rate_limit())
    if scope.spark:
        targets.append(_spark_operator())
    if scope.starrocks:
        targets.append(_starrocks())
    if scope.polaris:
        targets += [_polaris(scope.polaris_namespace), _postgres(scope.polaris_namespace)]
    if scope.aistor:
        targets.append(_aistor(scope))
    return targets


# The flows the metrics stack opens ------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


def metrics_flow(site: SiteConfig) -> Flow:
    """Every other cluster's Prometheus remote-writes to compute's, at its receiver VIP."""
    return Flow(
        description="Every other cluster's Prometheus remote-writes its series to compute's (observability in-cluster).",
        sources=sorted(key for key, cluster in site.clusters.items() if cluster.role != "compute"),
        to=site.keys_with_role("compute"), port=PROMETHEUS_PORT, to_namespace=MONITORING_NAMESPACE, to_labels=PROMETHEUS_POD_LABELS,
        from_namespace=MONITORING_NAMESPACE, from_labels=PROMETHEUS_POD_LABELS,
    )


def metrics_flows(site: SiteConfig) -> dict[str, Flow]:
    """The metrics flow, while the site's metrics are kept in-cluster (observability.metrics in-cluster)."""
    return {METRICS_FLOW: metrics_flow(site)} if metrics_in_cluster(site) else {}
