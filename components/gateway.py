"""One Envoy Gateway at a fixed VIP: shared by the inference gateway (GPU cluster) and the compute ingress.

Installs the pinned Envoy Gateway chart, then an EnvoyProxy whose Service is a LoadBalancer at the
given VIP with `externalTrafficPolicy: Local` (flow rules match the client's address), a
GatewayClass, and a Gateway with HTTPS listeners that accept routes only from namespaces that ask
for them by label.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.constants import GATEWAY_NAMESPACE, HTTPS_PORT
from components.kube import Adoption, helm_release, namespace

ROUTES_LABEL = "fab.internal/gateway"
"""Namespace label naming the Gateway whose routes the namespace may attach."""


def https_listener(name: str, hostname: str, tls_secret: str, gateway: str) -> dict[str, Any]:
    return {
        "name": name,
        "protocol": "HTTPS",
        "port": HTTPS_PORT,
        "hostname": hostname,
        "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": tls_secret}]},
        "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {ROUTES_LABEL: gateway}}}},
    }


def envoy_gateway(prefix: str, opts: pulumi.ResourceOptions, *, adopt: Adoption, gateway: str, gateway_class: str,
                  description: str, service_labels: dict[str, str], vip: str, listeners: list[dict[str, Any]]) -> k8s.apiextensions.CustomResource:
    """Envoy Gateway and one Gateway named `gateway` in envoy-gateway-system of the cluster `opts` deploy to; returns the Gateway."""
    ns = namespace(f"{prefix}-ns-{GATEWAY_NAMESPACE}", GATEWAY_NAMESPACE, opts, adopt=adopt)
    controller = helm_release(
        f"{prefix}-envoy-gateway", versions.ENVOY_GATEWAY, name="envoy-gateway", namespace=GATEWAY_NAMESPACE,
        values={"deployment": {"replicas": 2}}, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[ns])),
        adopt=adopt,
    )
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[controller]))

    def cr(logical: str, api: str, kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(f"{prefix}-{logical}", api_version=api, kind=kind, metadata=metadata, spec=spec, opts=after)

    cr(
        "envoy-proxy", versions.ENVOY_GATEWAY_API, "EnvoyProxy", {"name": gateway, "namespace": GATEWAY_NAMESPACE},
        {
            "provider": {
                "type": "Kubernetes",
                "kubernetes": {
                    "envoyDeployment": {"replicas": 2},
                    "envoyService": {
                        "type": "LoadBalancer",
                        # Keeps the caller's address, which the cross-cluster flow rules match on.
                        "externalTrafficPolicy": "Local",
                        "labels": service_labels,
                        "annotations": {"lbipam.cilium.io/ips": vip},
                    },
                },
            }
        },
    )
    cr(
        "gateway-class", versions.GATEWAY_API, "GatewayClass", {"name": gateway_class},
        {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller", "description": description},
    )
    return cr(
        "gateway", versions.GATEWAY_API, "Gateway", {"name": gateway, "namespace": GATEWAY_NAMESPACE},
        {
            "gatewayClassName": gateway_class,
            "infrastructure": {"parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": gateway}},
            "listeners": listeners,
        },
    )


def http_route(logical: str, opts: pulumi.ResourceOptions, *, name: str, namespace_: str, gateway: str, listener: str,
               hostname: str, rules: list[dict[str, Any]]) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        logical,
        api_version=versions.GATEWAY_API,
        kind="HTTPRoute",
        metadata={"name": name, "namespace": namespace_},
        spec={
            "parentRefs": [{"name": gateway, "namespace": GATEWAY_NAMESPACE, "sectionName": listener}],
            "hostnames": [hostname],
            "rules": rules,
        },
        opts=opts,
    )
