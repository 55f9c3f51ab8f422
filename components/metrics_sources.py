"""What the metrics stack scrapes, as the pinned charts and operators expose it (issue 19, "Metrics"): the labels of the
pods and Services that export metrics, their ports and paths, and the chart values and environment that turn the
exporters on. The components that install those charts (components/cilium.py, components/gateway.py) read it, and so
do the monitors that scrape them (components/monitors.py); it knows nothing of either.
"""

from __future__ import annotations

from typing import Any

from components.constants import APP_LABEL, ENVOY_PROXY_LABELS, VLLM_APP

# Labels of what is scraped, as the pinned charts and operators set them.
VLLM_POD_LABELS = {APP_LABEL: VLLM_APP}
"""vLLM pods (components/serving.py); each also carries MODEL_LABEL."""
ENVOY_PROXY_POD_LABELS = {**ENVOY_PROXY_LABELS, "app.kubernetes.io/component": "proxy"}
"""Envoy Gateway v1.9.0's proxy pods (internal/infrastructure/kubernetes/proxy): container port `metrics` (19001),
/stats/prometheus."""
OWNING_GATEWAY_LABEL = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE_LABEL = "gateway.envoyproxy.io/owning-gateway-namespace"
RATE_LIMIT_POD_LABELS = {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component": "ratelimit"}
"""Envoy Gateway v1.9.0's rate limit service (internal/infrastructure/kubernetes/ratelimit): port `metrics` (19001), /metrics."""
KUEUE_METRICS_SERVICE_LABELS = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/component": "metrics-service"}
"""Kueue chart 0.19.2's `kueue-controller-manager-metrics-service`: port `https` (8443), authenticated by token."""
DCGM_EXPORTER_SERVICE_LABELS = {"app": "nvidia-dcgm-exporter"}
"""The labels of the Service the GPU Operator v25.10.1 puts before its DCGM exporter (port `gpu-metrics`, 9400)."""
SPARK_OPERATOR_NAMESPACE = "spark-operator"
SPARK_OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "spark-operator", "app.kubernetes.io/component": "controller"}
"""Spark operator chart 2.5.2's controller: port `metrics` (8080, `prometheus.metrics.enable` defaults to true)."""
STARROCKS_COMPONENT_LABEL = "app.kubernetes.io/component"
STARROCKS_OWNER_LABEL = "app.starrocks.ownerreference/name"
"""StarRocks operator v1.11.5 pod labels (pkg/k8sutils/load): `<cluster>-fe` / `<cluster>-cn` and `fe` / `cn`; FE serves
/metrics on `http-port` (8030), CN on `webserver-port` (8040)."""
POLARIS_MANAGEMENT_PORT = "polaris-mgmt"
"""Polaris chart 1.7.0's management port (8182): Quarkus serves /q/metrics there."""
CNPG_CLUSTER_LABEL = "cnpg.io/cluster"
CNPG_METRICS_PORT = "metrics"
"""CloudNativePG instance pods export on port `metrics` (9187)."""
AISTOR_METRICS_PATH = "/minio/metrics/v3"
AISTOR_BUCKET_METRICS_PATH = f"{AISTOR_METRICS_PATH}/bucket/api/*"
"""Per-bucket S3 API metrics (`minio_bucket_api_*`): not in the base endpoint's answer; AIStor serves them for the buckets
the last path segment names, `*` matching every bucket (a bucket added later is scraped without a change here)."""
CILIUM_NAMESPACE = "kube-system"
CILIUM_AGENT_POD_LABELS = {"k8s-app": "cilium"}
CILIUM_OPERATOR_POD_LABELS = {"io.cilium/app": "operator"}
CILIUM_AGENT_METRICS_PORT = 9962
CILIUM_OPERATOR_METRICS_PORT = 9963
HUBBLE_METRICS_PORT = 9965
"""The Cilium 1.18 chart's default ports (prometheus.port, operator.prometheus.port, hubble.metrics.port); its pods
name them `prometheus` (agent, operator) and `hubble-metrics` (agent)."""

HUBBLE_METRICS = [
    # Every drop with both ends' identity labels, which carry `io.cilium.k8s.policy.cluster` in a ClusterMesh: the
    # dashboards' and the runbooks' "cross-cluster flow drops" (source cluster -> destination cluster, reason).
    ("drop:sourceContext=identity|reserved-identity;destinationContext=identity|reserved-identity;"
     "labelsContext=source_namespace,destination_namespace,traffic_direction"),
    "flow:sourceContext=namespace|reserved-identity;destinationContext=namespace|reserved-identity",
]
"""`hubble.metrics.enabled` of every Cilium the program installs."""


def cilium_metrics_values() -> dict[str, Any]:
    """Cilium 1.18 chart values that turn on the agent's, the operator's and Hubble's metrics (their chart-made
    ServiceMonitors stay off: the CRD is not there when Cilium installs)."""
    return {
        "prometheus": {"enabled": True, "port": CILIUM_AGENT_METRICS_PORT},
        "operator": {"prometheus": {"enabled": True, "port": CILIUM_OPERATOR_METRICS_PORT}},
        "hubble": {"metrics": {"enabled": list(HUBBLE_METRICS), "port": HUBBLE_METRICS_PORT}},
    }


def rate_limit_near_env(saturation_percent: int) -> dict[str, str]:
    """The rate limit service's environment entry that makes `ratelimit_service_rate_limit_near_limit` count the hits
    above `rate_limit_saturation_percent` of a team's limit (envoyproxy/ratelimit's NEAR_LIMIT_RATIO, default 0.8)."""
    return {"name": "NEAR_LIMIT_RATIO", "value": f"{saturation_percent / 100:g}"}
