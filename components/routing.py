"""Model-aware routing (`inference.routing: inference-extension`): per model an InferencePool and its endpoint picker
(EPP) of the Gateway API Inference Extension, behind the same Envoy Gateway, URL, JWT and rate limits.

Envoy Gateway 1.9 cannot take an InferencePool as an HTTPRoute backend by itself (envoyproxy/gateway#4423: that needs
Envoy AI Gateway's extension server). So the route keeps the model's Service as its backend, and two Envoy Gateway
policies attached to it do what an InferencePool backend would:

- an EnvoyExtensionPolicy runs the EPP as the route's external processor (ext_proc, gRPC on port 9002), which reads the
  request and sets `x-gateway-destination-endpoint` to the replica it picks (by queue depth, KV cache use and prefix
  cache hits, read from each vLLM's metrics), in the full-duplex streamed mode the v1.5.0 EPP is run with upstream
  (config/charts/standalone);
- the route's one BackendTrafficPolicy (the rate limits) adds `loadBalancer.endpointOverride` on that header
  (envoyproxy/gateway#6458), so Envoy sends the request to that pod; without the header, the Service's replicas are
  balanced by least request as before.

The EPP objects are written here rather than through the inferencepool chart: the chart sets no securityContext (the
inference namespace enforces Pod Security restricted), serves ext_proc over TLS with a self-signed certificate Envoy
Gateway cannot verify, and would need a post-renderer to fix both; its templates are followed for the flags, ports,
probes, RBAC and the plugin configuration. The InferencePool CRD comes from the release's manifest (no chart installs
it): `inference_pool_crds`, which everything here depends on.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import names
from components.gpu import INFERENCE_NAMESPACE
from components.kube import WORKLOAD_SKIPS, checkov_skips, restricted_container, restricted_pod_security_context
from components.registry import UPSTREAM, Registry
from components.serving import VLLM_PORT, stable_labels

EPP_COMPONENT = "endpoint-picker"
"""`app.kubernetes.io/component` of every endpoint picker's pods: the vLLM fence admits them (components/inference.py)."""
EPP_GRPC_PORT = 9002
"""ext_proc, which Envoy calls (the chart's `extProcPort`)."""
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
EPP_USER = 65532
"""The EPP image is distroless `nonroot`."""
DESTINATION_HEADER = "x-gateway-destination-endpoint"
"""Where the EPP puts the picked pod's `IP:port` (pkg/epp/metadata DestinationEndpointKey, v1.5.0)."""
PLUGINS_FILE = "default-plugins.yaml"
EXT_PROC_TIMEOUT = "300s"
"""How long Envoy waits for the EPP's answer to a message: the chart's route timeout, as a request may wait in its queue."""
EPP_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
"""Below the chart's defaults (4 CPUs, 8Gi requested), which are sized for scale tests at high QPS."""

PLUGINS = """apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: prefix-cache-scorer
- type: metrics-data-source
  parameters:
    scheme: "http"
    path: "/metrics"
    insecureSkipVerify: true
- type: core-metrics-extractor
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
"""
"""The v1.5.0 chart's default plugin configuration for vLLM over HTTP (its `default-plugins.yaml`)."""


def inference_pool_crds(prefix: str, opts: pulumi.ResourceOptions, registry: Registry = UPSTREAM) -> pulumi.Resource:
    """The Inference Extension's CRDs from the pinned release manifest, which the provider reads at deploy time: from
    GitHub, or the site registry's copy (`registry.files`). The provider fetches it with the system's trust store, which
    the machine running `pulumi up` extends with the site CA where the file server's certificate is the site's own
    (docs/airgap.md): a ConfigFile takes no CA of its own."""
    return k8s.yaml.v2.ConfigFile(f"{prefix}-inference-extension-crds", file=registry.file(versions.INFERENCE_EXTENSION_CRDS),
                                  opts=opts)


def endpoint_picker(model: str, registry: Registry = UPSTREAM) -> list[dict[str, Any]]:
    """A model's InferencePool and its EPP: ServiceAccount, Role and RoleBinding, ConfigMap, Deployment and Service. The
    EPP's image comes from the inference cluster's `registry`, whose pull Secret its pod names where the site has one."""
    name = names.EPP(model)
    pool = names.VLLM(model)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": EPP_COMPONENT}
    meta = {"name": name, "namespace": INFERENCE_NAMESPACE, "labels": labels}
    read = ["get", "watch", "list"]
    container = restricted_container(
        "epp", registry.image(versions.EPP_IMAGE), EPP_USER,
        args=[
            "--pool-name", pool,
            "--pool-namespace", INFERENCE_NAMESPACE,
            "--pool-group", "inference.networking.k8s.io",
            "--zap-encoder", "json",
            "--config-file", f"/config/{PLUGINS_FILE}",
            "--v", "1",
            "--tracing=false",
            # Plain gRPC inside the cluster: by default the EPP serves ext_proc with a self-signed certificate, which
            # Envoy Gateway's BackendTLSPolicy cannot verify.
            "--secure-serving=false",
        ],
        env=[
            {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        ports=[
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        resources=EPP_RESOURCES,
        livenessProbe={"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}, "initialDelaySeconds": 5, "periodSeconds": 10},
        readinessProbe={"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}, "periodSeconds": 2},
        volumeMounts=[{"name": "plugins", "mountPath": "/config", "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}],
    )
    return [
        {
            "apiVersion": versions.INFERENCE_POOL_API, "kind": "InferencePool",
            "metadata": {"name": pool, "namespace": INFERENCE_NAMESPACE},
            "spec": {
                "targetPorts": [{"number": VLLM_PORT}],
                "appProtocol": "http",
                # The model's stable replicas: the pods its Service selects.
                "selector": {"matchLabels": stable_labels(model)},
                "endpointPickerRef": {"name": name, "port": {"number": EPP_GRPC_PORT}, "failureMode": "FailClose"},
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": read},
                {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
                {"apiGroups": ["inference.networking.x-k8s.io"], "resources": ["inferenceobjectives", "inferencemodelrewrites"], "verbs": read},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": INFERENCE_NAMESPACE}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {PLUGINS_FILE: PLUGINS}},
        {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {**meta, "annotations": checkov_skips(*WORKLOAD_SKIPS, "CKV_K8S_38")},
            "spec": {
                # One active picker, as upstream runs it: its prefix-cache state is per replica. Recreate lets the new
                # one take over at once.
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        # No toleration: on the inference cluster's untainted system nodes, never on a GPU node.
                        "serviceAccountName": name,
                        "securityContext": restricted_pod_security_context(),
                        **registry.pod_fields(),
                        "terminationGracePeriodSeconds": 130,
                        "containers": [container],
                        "volumes": [
                            {"name": "plugins", "configMap": {"name": name}},
                            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {
                "type": "ClusterIP", "selector": labels,
                "ports": [
                    {"name": "grpc-ext-proc", "port": EPP_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
                    {"name": "http-metrics", "port": EPP_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
                ],
            },
        },
    ]


def extension_policy(model: str) -> dict[str, Any]:
    """The EnvoyExtensionPolicy running the model's EPP as its route's external processor.

    Fail closed: Envoy Gateway refuses failOpen with the full-duplex streamed body, and a request the picker did not see
    would miss its queueing; while the picker is down the model answers 5xx (docs/operations.md).
    """
    return {
        "apiVersion": versions.ENVOY_GATEWAY_API, "kind": "EnvoyExtensionPolicy",
        "metadata": {"name": names.VLLM(model), "namespace": INFERENCE_NAMESPACE},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": names.VLLM(model)}],
            "extProc": [{
                "backendRefs": [{"group": "", "kind": "Service", "name": names.EPP(model), "port": EPP_GRPC_PORT}],
                "processingMode": {"request": {"body": "FullDuplexStreamed"}, "response": {"body": "FullDuplexStreamed"}},
                "messageTimeout": EXT_PROC_TIMEOUT,
                "failOpen": False,
            }],
        },
    }


def endpoint_override() -> dict[str, Any]:
    """The route BackendTrafficPolicy's `loadBalancer`: to the pod the EPP named, else least request over the Service."""
    return {"type": "LeastRequest", "endpointOverride": {"extractFrom": [{"header": DESTINATION_HEADER}]}}
