"""One Envoy Gateway at a fixed VIP: shared by the inference gateway (GPU cluster) and the compute ingress.

Installs the pinned Envoy Gateway chart, then an EnvoyProxy whose Service is a LoadBalancer at the
given VIP with `externalTrafficPolicy: Local` (flow rules match the client's address), a
GatewayClass, and a Gateway with HTTPS listeners that accept routes only from namespaces that ask
for them by label. Where a gateway's rate limits must hold across its replicas (the inference
gateway's per-team limits), `rate_limit_store()` adds the counter store of Envoy Gateway's global
rate limit service: see docs/architecture.md, "Per-team rate limits". On a site with a registry, the proxies' Envoy
image (which only the EnvoyProxy can name) and the store's image come from its mirror; the chart's own images and the
rate limit service's are in components/airgap/observability.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.constants import ENVOY_HTTPS_TARGET_PORT, GATEWAY_NAMESPACE, HTTPS_PORT
from components.kube import (
    Adoption,
    checkov_skips,
    helm_release,
    namespace,
    random_secret,
    restricted_container,
    restricted_pod_security_context,
)
from components.metrics_sources import ENVOY_PROXY_POD_LABELS, OWNING_GATEWAY_LABEL, OWNING_GATEWAY_NAMESPACE_LABEL, rate_limit_near_env
from components.network_policies import fence_policy
from components.registry import Registry

if TYPE_CHECKING:
    from components.network import GlobalService

ROUTES_LABEL = "fab.internal/gateway"
"""Namespace label naming the Gateway whose routes the namespace may attach."""
PROXY_REPLICAS = 2
"""Envoy proxies per Gateway: a node or pod loss keeps the VIP served."""
CONTROLLER_REPLICAS = 2

RATE_LIMIT_STORE = "ratelimit-valkey"
"""Deployment, Service and Secret of the global rate limit counters, in envoy-gateway-system."""
RATE_LIMIT_STORE_PORT = 6379
RATE_LIMIT_STORE_USER = 10001
"""Valkey runs as any non-root UID whose data directory is writable (an emptyDir here); a high one keeps clear of host users."""
RATE_LIMIT_STORE_PASSWORD_KEY = "password"
RATE_LIMIT_STORE_CONFIG_KEY = "valkey.conf"
RATE_LIMIT_SERVICE_REPLICAS = 2
"""Envoy Gateway's rate limit service (the `envoy-ratelimit` Deployment it runs): stateless, so two for availability."""


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
                  description: str, service_labels: dict[str, str], vip: str, listeners: list[dict[str, Any]],
                  registry: Registry, global_rate_limits: bool = False,
                  near_limit_percent: int | None = None, service: GlobalService | None = None,
                  backends: bool = False, cilium: pulumi.Resource | None = None) -> k8s.apiextensions.CustomResource:
    """Envoy Gateway and one Gateway named `gateway` in envoy-gateway-system of the cluster `opts` deploy to; returns the Gateway.

    `global_rate_limits` runs the rate limit service with its counter store, so that the gateway's routes can
    use `rateLimit.global` (counted once across all proxies); without it Envoy Gateway refuses global limits.
    `near_limit_percent` is the share of a limit above which the service counts hits as near the limit (the rate-limit
    saturation alert's threshold); defaults to the service's own 80.
    `service` announces the proxies as that ClusterMesh global service through a Service of its own (`global_service`);
    Envoy Gateway's LoadBalancer Service at `vip` is left as Envoy Gateway names it.
    `backends` lets policies name Envoy Gateway `Backend`s (`extensionApis.enableBackend`; off by default, as a Backend
    can point anywhere): the inference gateway's JWKS fetch from the site's Keycloak trusts the site CA through one.
    `cilium` is the cluster's Cilium release (None where Cilium is installed otherwise): the store's network fence, a
    CiliumNetworkPolicy, waits for it.
    """
    ns = namespace(f"{prefix}-ns-{GATEWAY_NAMESPACE}", GATEWAY_NAMESPACE, opts, adopt=adopt, registry=registry)
    # The namespace must exist before anything is created in it (the rate limit store's Secret, Deployment and Service).
    in_ns = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[ns]))
    values: dict[str, Any] = {"deployment": {"replicas": CONTROLLER_REPLICAS}}
    before_controller: list[pulumi.Resource] = [ns]  # the chart installs into the namespace
    if global_rate_limits:
        values["config"] = {"envoyGateway": rate_limit_settings(near_limit_percent)}
        # The rate limit service Envoy Gateway starts reads the store's password from its Secret; the store itself may
        # come up later (until then the service fails open onto the local backstop).
        before_controller.append(rate_limit_store(prefix, in_ns, registry, cilium))
    if backends:
        values.setdefault("config", {}).setdefault("envoyGateway", {})["extensionApis"] = {"enableBackend": True}
    controller = helm_release(
        f"{prefix}-envoy-gateway", versions.ENVOY_GATEWAY, name="envoy-gateway", namespace=GATEWAY_NAMESPACE,
        values=values, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=before_controller)),
        adopt=adopt, registry=registry,
    )
    # The chart installs the Gateway API and Envoy Gateway CRDs that the EnvoyProxy, GatewayClass and Gateway are instances
    # of.
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[controller]))

    def cr(logical: str, api: str, kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(f"{prefix}-{logical}", api_version=api, kind=kind, metadata=metadata, spec=spec, opts=after)

    cr(
        "envoy-proxy", versions.ENVOY_GATEWAY_API, "EnvoyProxy", {"name": gateway, "namespace": GATEWAY_NAMESPACE},
        {
            "provider": {
                "type": "Kubernetes",
                "kubernetes": {
                    "envoyDeployment": proxy_deployment(registry),
                    "envoyService": {
                        # Never named here: renaming it on a live site would make Envoy Gateway replace the Service,
                        # and the old and the new one would ask LB-IPAM for the same VIP.
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
    if service is not None:
        # The global Service needs only its namespace: it selects the proxies' pods, which exist only later (a Service
        # created before its pods is done at once).
        global_service(f"{prefix}-global-service", service, gateway, in_ns)
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


def global_service(logical: str, service: GlobalService, gateway: str, opts: pulumi.ResourceOptions) -> k8s.core.v1.Service:
    """A ClusterIP Service `service.name` selecting the proxies of `gateway`, announced as that ClusterMesh global service.

    Beside Envoy Gateway's own LoadBalancer Service, not instead of it: the VIP, its Service and its name stay as they
    are. The port names and target ports are Envoy Gateway's (`https-443` to the proxy's 10443), so that Cilium pairs
    this Service's backends with the consumer clusters' Service of the same name and ports.
    """
    return k8s.core.v1.Service(
        logical,
        metadata={"name": service.name, "namespace": GATEWAY_NAMESPACE, "annotations": service.backend_annotations()},
        spec={
            "type": "ClusterIP",
            "selector": {**ENVOY_PROXY_POD_LABELS, OWNING_GATEWAY_LABEL: gateway, OWNING_GATEWAY_NAMESPACE_LABEL: GATEWAY_NAMESPACE},
            "ports": [{"name": port_name, "port": port, "targetPort": ENVOY_HTTPS_TARGET_PORT, "protocol": "TCP"}
                      for port_name, port in service.ports],
        },
        opts=opts,
    )


def proxy_deployment(registry: Registry) -> dict[str, Any]:
    """The EnvoyProxy's `envoyDeployment`: the proxies' replicas and, on a site with a registry, their Envoy image (the
    one compiled into the controller, from the mirror) and pull Secret, which only this EnvoyProxy can set (it replaces
    the controller's default EnvoyProxy whole)."""
    deployment: dict[str, Any] = {"replicas": PROXY_REPLICAS}
    if registry.mirrored:
        deployment["container"] = {"image": registry.image(versions.ENVOY_PROXY_IMAGE)}
    if registry.pull_secret:
        deployment["pod"] = registry.pod_fields()
    return deployment


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


def rate_limit_settings(near_limit_percent: int | None = None) -> dict[str, Any]:
    """The EnvoyGateway settings (chart values `config.envoyGateway`) of the global rate limit service and its store.

    Fail open: when the service or its store does not answer in time, Envoy admits the request, and the
    routes' local rate limits (the same per-team rates, per proxy) still bound every team. Failing closed
    would turn a restart of the store into an outage of every model.
    """
    return {
        "rateLimit": {
            "backend": {"type": "Redis", "redis": {"url": f"{RATE_LIMIT_STORE}.{GATEWAY_NAMESPACE}.svc:{RATE_LIMIT_STORE_PORT}"}},
            "failClosed": False,
        },
        "provider": {
            "type": "Kubernetes",
            "kubernetes": {
                "rateLimitDeployment": {
                    "replicas": RATE_LIMIT_SERVICE_REPLICAS,
                    "container": {
                        "env": [{
                            "name": "REDIS_AUTH",
                            "valueFrom": {"secretKeyRef": {"name": RATE_LIMIT_STORE, "key": RATE_LIMIT_STORE_PASSWORD_KEY}},
                        }, *([rate_limit_near_env(near_limit_percent)] if near_limit_percent is not None else [])],
                    },
                },
            },
        },
    }


def _store_config(password: str) -> str:
    """valkey.conf: counters only, kept in memory and never written to disk; clients authenticate."""
    return "\n".join([
        "bind * -::*",
        f"port {RATE_LIMIT_STORE_PORT}",
        "protected-mode yes",
        f"requirepass {password}",
        'save ""',
        "appendonly no",
        "dir /data",
        # Counters expire with their window; under memory pressure the nearest to expiring go first.
        "maxmemory 128mb",
        "maxmemory-policy volatile-ttl",
        "",
    ])


RATE_LIMIT_SERVICE_LABELS = {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component": "ratelimit"}
"""The pods of Envoy Gateway's rate limit service (envoyproxy/gateway v1.9.0, internal/infrastructure/kubernetes/ratelimit:
`rateLimitLabels`, beside `app.kubernetes.io/managed-by: envoy-gateway`)."""
RATE_LIMIT_STORE_LABELS = {"app.kubernetes.io/name": RATE_LIMIT_STORE, "app.kubernetes.io/component": "ratelimit-store"}


def rate_limit_store_fence() -> dict[str, Any]:
    """Only the rate limit service reaches the counter store: a pod that could fill or flush it would make the global
    limit fail open onto the per-proxy backstop, and its password is the only other lock."""
    return fence_policy(RATE_LIMIT_STORE, GATEWAY_NAMESPACE, "The rate limit counters: only the rate limit service reaches them.",
                        RATE_LIMIT_STORE_LABELS, {GATEWAY_NAMESPACE: {key: [value] for key, value in RATE_LIMIT_SERVICE_LABELS.items()}})


def rate_limit_store(prefix: str, opts: pulumi.ResourceOptions, registry: Registry,
                     cilium: pulumi.Resource | None = None) -> k8s.core.v1.Secret:
    """Valkey (a Redis-protocol server) holding the global rate limit counters, for Envoy Gateway's rate limit service.

    One replica and no volume: the counters are worth one rate limit window, so losing them on a restart
    admits at most one extra window, which costs less than running a replicated store. The password is
    generated and kept in the stack's state; the server reads it from its configuration file (not its
    command line), the rate limit service from the same Secret, which is returned.
    """
    labels = dict(RATE_LIMIT_STORE_LABELS)
    password = random_secret(f"{prefix}-{RATE_LIMIT_STORE}-password", 40, opts)
    secret = k8s.core.v1.Secret(
        f"{prefix}-{RATE_LIMIT_STORE}-secret",
        metadata={"name": RATE_LIMIT_STORE, "namespace": GATEWAY_NAMESPACE, "labels": labels},
        type="Opaque",
        string_data={RATE_LIMIT_STORE_PASSWORD_KEY: password, RATE_LIMIT_STORE_CONFIG_KEY: password.apply(_store_config)},
        opts=opts,
    )
    port = {"name": "redis", "containerPort": RATE_LIMIT_STORE_PORT, "protocol": "TCP"}
    probe = {"tcpSocket": {"port": "redis"}, "periodSeconds": 10}
    container = restricted_container(
        "valkey", registry.image(versions.RATE_LIMIT_STORE_IMAGE), RATE_LIMIT_STORE_USER,
        args=[f"/etc/valkey/{RATE_LIMIT_STORE_CONFIG_KEY}"],
        ports=[port],
        resources={"requests": {"cpu": "100m", "memory": "160Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
        readinessProbe=probe,
        livenessProbe={**probe, "failureThreshold": 6},
        volumeMounts=[{"name": "config", "mountPath": "/etc/valkey", "readOnly": True}, {"name": "data", "mountPath": "/data"}],
    )
    k8s.apps.v1.Deployment(
        f"{prefix}-{RATE_LIMIT_STORE}",
        metadata={"name": RATE_LIMIT_STORE, "namespace": GATEWAY_NAMESPACE, "labels": labels,
                  "annotations": checkov_skips("CKV_K8S_43", "CKV2_K8S_6")},
        spec={
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security_context(fsGroup=RATE_LIMIT_STORE_USER),
                    **registry.pod_fields(),
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "secret": {"secretName": RATE_LIMIT_STORE, "defaultMode": 0o440}},
                        {"name": "data", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
        # The pod mounts the Secret (its configuration and password): it cannot start before the Secret exists.
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[secret])),
    )
    k8s.core.v1.Service(
        f"{prefix}-{RATE_LIMIT_STORE}-svc",
        metadata={"name": RATE_LIMIT_STORE, "namespace": GATEWAY_NAMESPACE, "labels": labels},
        spec={"type": "ClusterIP", "selector": labels,
              "ports": [{"name": "redis", "port": RATE_LIMIT_STORE_PORT, "targetPort": "redis", "protocol": "TCP"}]},
        opts=opts,
    )
    fence = rate_limit_store_fence()
    k8s.apiextensions.CustomResource(
        f"{prefix}-{RATE_LIMIT_STORE}-fence", api_version=fence["apiVersion"], kind=fence["kind"], metadata=fence["metadata"],
        spec=fence["spec"],
        # the namespace (`opts`), and Cilium's release, which registers the CiliumNetworkPolicy CRD
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[cilium] if cilium else [])),
    )
    return secret
