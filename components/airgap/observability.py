"""Image values of the charts of the observability part of the platform (components/airgap): the metrics stack
(kube-prometheus-stack) and Envoy Gateway (the inference gateway and the compute ingress)."""

from __future__ import annotations

from typing import Any

from components import versions
from components.registry import Registry, merge_values

PROMETHEUS_STACK_IMAGES: dict[tuple[str, ...], str] = {
    ("prometheusOperator", "image"): "quay.io/prometheus-operator/prometheus-operator",
    # The operator's arguments: the config reloader it adds to every Prometheus and Alertmanager pod, and the Thanos
    # sidecar it would add to a Prometheus with `thanos` set.
    ("prometheusOperator", "prometheusConfigReloader", "image"): "quay.io/prometheus-operator/prometheus-config-reloader",
    ("prometheusOperator", "thanosImage"): "quay.io/thanos/thanos",
    # The hook Jobs that create and patch the admission webhook's certificate.
    ("prometheusOperator", "admissionWebhooks", "patch", "image"): "ghcr.io/jkroepke/kube-webhook-certgen",
    ("prometheus", "prometheusSpec", "image"): "quay.io/prometheus/prometheus",
    ("alertmanager", "alertmanagerSpec", "image"): "quay.io/prometheus/alertmanager",
    ("kube-state-metrics", "image"): "registry.k8s.io/kube-state-metrics/kube-state-metrics",
    ("prometheus-node-exporter", "image"): "quay.io/prometheus/node-exporter",
    ("grafana", "image"): "docker.io/grafana/grafana",
    ("grafana", "sidecar", "image"): "quay.io/kiwigrid/k8s-sidecar",
    ("grafana", "initChownData", "image"): "docker.io/library/busybox",
    ("grafana", "downloadDashboardsImage"): "docker.io/curlimages/curl",
}
"""kube-prometheus-stack 88.5.3's image keys, each with the source repository its values name (registry and repository
apart; the tag stays the chart's). Only these run with the program's values: the chart's other images (the CRD upgrade
Job, the admission webhook Deployment, Thanos Ruler, kube-rbac-proxy, Grafana's image renderer and test, the Windows
exporter) belong to parts that are off."""


GRAFANA_OFFLINE: dict[str, Any] = {
    "plugins": {"preinstall_disabled": True, "public_key_retrieval_disabled": True},
    "analytics": {"check_for_plugin_updates": False},
}
"""Grafana settings that keep it from calling grafana.com, which an air-gapped site cannot reach: Grafana 12 and later
install and update a default list of plugins from grafana.com at every start (`[plugins] preinstall_disabled`: the
Prometheus data source the dashboards use is built into the image), fetch the plugins' signing keys
(`public_key_retrieval_disabled`: the key compiled in is used) and look for plugin updates. Its own update check is off
on every site (components/observability.py)."""


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """`value` at `path` of an otherwise empty values tree."""
    for key in reversed(path):
        value = {key: value}
    return value


def _kube_prometheus_stack(registry: Registry) -> dict[str, Any]:
    """Every image the stack runs, from the mirror under its source registry, the pull Secret on every pod, and a Grafana
    that downloads nothing from grafana.com.

    Per image, not `global.imageRegistry`: the images come from four registries (quay.io, registry.k8s.io, ghcr.io,
    docker.io), and one registry for all would drop the source host from the mirror's path. `global.imagePullSecrets`
    reaches the subcharts (Grafana, kube-state-metrics, node-exporter) and the service accounts of Prometheus and
    Alertmanager, whose pods the operator creates; the subcharts' own `imagePullSecrets` would only repeat it.
    """
    values: dict[str, Any] = {}
    for path, source in PROMETHEUS_STACK_IMAGES.items():
        ref = registry.ref(source)
        values = merge_values(values, _nested(path, {"registry": ref.registry, "repository": ref.repository}))
    values = merge_values(values, {"grafana": {"grafana.ini": GRAFANA_OFFLINE}})
    if registry.pull_secret:
        values["global"] = {"imagePullSecrets": registry.pull_secrets}
    return values


def _gateway_helm(registry: Registry) -> dict[str, Any]:
    """Envoy Gateway's controller and certgen image, and the images it launches and names in its configuration: the
    rate limit service (`rateLimitDeployment`) and the proxies' shutdown manager (the controller's image). The proxies'
    Envoy image and their pull Secret are set in each Gateway's EnvoyProxy (components/gateway.py): an EnvoyProxy without
    `mergeType` replaces the configuration's default one whole, so the chart's `global.images.envoyProxy` would not reach
    them.

    `global.imagePullSecrets` is the controller's, the certgen Job's and the rate limit service's pull Secret (the chart
    writes it into the configuration's `rateLimitDeployment.pod`)."""
    images: dict[str, Any] = {
        "envoyGateway": {"image": registry.image(versions.ENVOY_GATEWAY_IMAGE)},
        "ratelimit": {"image": registry.image(versions.ENVOY_RATELIMIT_IMAGE)},
    }
    values: dict[str, Any] = {"global": {"images": images}}
    if registry.pull_secret:
        values["global"]["imagePullSecrets"] = registry.pull_secrets
    return values


VALUES: dict[str, Any] = {
    "kube-prometheus-stack": _kube_prometheus_stack,
    "gateway-helm": _gateway_helm,
}
