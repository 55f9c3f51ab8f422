"""VendorCatalog: the Polaris catalog API for equipment vendors, on the compute ingress (DESIGN: outside users come through
compute's ingress; issue 23 item 3).

Vendors sit outside the site. They reach two things: the external S3 VIP (StorageCluster), with read-only keys scoped to
their tables' folders, and the catalog at https://catalog.<domain>/api/catalog, an HTTPS listener of the compute ingress
whose route sends the Iceberg REST API, and nothing else of Polaris, to the Polaris VIP on the storage cluster (a
selectorless Service whose EndpointSlice is that VIP, as GPU notebooks reach their hub). TLS ends at the ingress with its
certificate (`compute.ingress.tls_secret`); Polaris itself authenticates every call: the vendor's principal trades its
client id and secret for a token at /api/catalog/v1/oauth/tokens, and holds only the grants of `storage.vendors`. The
management API (/api/management) is not routed, so no vendor can reach it, whatever its token. The route answers the
vendors' own ranges (`storage.vendors.<name>.source_cidrs`) and nobody else: an Envoy Gateway SecurityPolicy on it
allows those client addresses and denies every other (the ingress Service keeps the client's address,
`externalTrafficPolicy: Local`, so Envoy sees the vendor's own). The policy is created before the route, so that the route
is never served without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.config import Flow, PolarisConfig, SiteConfig, VendorConfig, names
from components.constants import ENVOY_PROXY_LABELS, GATEWAY_NAMESPACE
from components.engines import GATEWAY, Ui
from components.gateway import ROUTES_LABEL, http_route
from components.kube import namespace
from components.providers import ClusterRef
from components.registry import UPSTREAM

VENDOR_CATALOG_NAMESPACE = "vendor-catalog"
"""The namespace on compute that holds the catalog's route and upstream Service (no pod runs in it)."""
CATALOG_SERVICE = "polaris"
CATALOG_PATH = "/api/catalog/"
"""The Iceberg REST API and its token endpoint; Polaris' management API (/api/management/) stays unreachable."""


def catalog_ui(polaris: PolarisConfig) -> Ui:
    """The catalog's listener on the compute ingress (ComputeCluster's `extra_uis`): its host name and DNS record. It has
    no sign-in page: Polaris' own OAuth client credentials authenticate (`callback` is the API's root)."""
    return Ui(host=names.CATALOG_HOST("").rstrip("."), service=CATALOG_SERVICE, port=polaris.port, callback=CATALOG_PATH)


def catalog_route_rules(polaris: PolarisConfig) -> list[dict[str, object]]:
    """Only the catalog API goes to Polaris."""
    return [{
        "matches": [{"path": {"type": "PathPrefix", "value": CATALOG_PATH.rstrip("/")}}],
        "backendRefs": [{"name": CATALOG_SERVICE, "port": polaris.port}],
    }]


def catalog_authorization(vendors: dict[str, VendorConfig]) -> dict[str, Any]:
    """The SecurityPolicy's `authorization`: each vendor's ranges allowed (one rule per vendor, named after it), every
    other client denied."""
    return {
        "defaultAction": "Deny",
        "rules": [
            {"name": f"vendor-{vendor}", "action": "Allow", "principal": {"clientCIDRs": [str(cidr) for cidr in spec.source_cidrs]}}
            for vendor, spec in sorted(vendors.items())
        ],
    }


@dataclass(frozen=True)
class VendorCatalogArgs:
    polaris: PolarisConfig
    """The `storage.polaris` section: Polaris' VIP and port, which the route sends to."""
    compute: ClusterRef
    """The compute cluster, whose ingress vendors come through."""
    gateway: pulumi.Resource
    """The compute ingress Gateway, with the catalog's listener (`catalog_ui`)."""
    domain: str
    vendors: dict[str, VendorConfig]
    """`storage.vendors`: whose ranges the route admits."""


class VendorCatalog(pulumi.ComponentResource):
    """The catalog API's route on the compute ingress to Polaris on the storage cluster."""

    url: pulumi.Output[str]
    """The Iceberg REST URI vendors configure (`uri`), with the warehouse and their principal's credentials."""

    def __init__(self, name: str, args: VendorCatalogArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fab:sharing:VendorCatalog", name, None, opts)
        polaris = args.polaris
        on_compute = pulumi.ResourceOptions(parent=self, provider=args.compute.provider)
        ns = namespace(f"{name}-ns", VENDOR_CATALOG_NAMESPACE, on_compute, labels={ROUTES_LABEL: GATEWAY}, registry=UPSTREAM)
        # the namespace must exist before anything is created in it
        after = pulumi.ResourceOptions.merge(on_compute, pulumi.ResourceOptions(depends_on=[ns]))
        service = k8s.core.v1.Service(
            f"{name}-upstream", metadata={"name": CATALOG_SERVICE, "namespace": VENDOR_CATALOG_NAMESPACE},
            # No selector: its endpoints are the EndpointSlice below, Polaris' VIP on the storage cluster.
            spec={"type": "ClusterIP", "ports": [{"name": "rest", "port": polaris.port, "protocol": "TCP"}]},
            opts=after,
        )
        slice_ = k8s.discovery.v1.EndpointSlice(
            f"{name}-upstream-endpoints",
            metadata={"name": f"{CATALOG_SERVICE}-vip", "namespace": VENDOR_CATALOG_NAMESPACE,
                      "labels": {"kubernetes.io/service-name": CATALOG_SERVICE,
                                 "endpointslice.kubernetes.io/managed-by": "fab-platform"}},
            address_type="IPv4",
            endpoints=[{"addresses": [str(polaris.vip)], "conditions": {"ready": True}}],
            ports=[{"name": "rest", "port": polaris.port, "protocol": "TCP"}],
            opts=after,
        )
        ui = catalog_ui(polaris)
        # The vendors' allowlist exists before the route, so that the route is never served without it. Envoy Gateway
        # accepts a policy whose target route does not exist yet: its translator skips a target it cannot find ("Skip if
        # the route is not found", envoyproxy/gateway internal/gatewayapi/securitypolicy.go, processSecurityPolicyForRoute)
        # and translates every route and policy again on each change, so the policy attaches when the route appears.
        sources = k8s.apiextensions.CustomResource(
            f"{name}-sources", api_version=versions.ENVOY_GATEWAY_API, kind="SecurityPolicy",
            metadata={"name": CATALOG_SERVICE, "namespace": VENDOR_CATALOG_NAMESPACE},
            spec={
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": CATALOG_SERVICE}],
                "authorization": catalog_authorization(args.vendors),
            },
            # The SecurityPolicy CRD comes with Envoy Gateway's chart, which the Gateway waits for; the policy goes in the
            # namespace.
            opts=pulumi.ResourceOptions.merge(on_compute, pulumi.ResourceOptions(depends_on=[args.gateway, ns])),
        )
        http_route(
            # The Gateway's listener (after the Gateway API CRDs), the Service and endpoint it sends to (the route never
            # points at a missing backend), and the vendors' allowlist (the route is never served without it).
            f"{name}-route", pulumi.ResourceOptions.merge(on_compute, pulumi.ResourceOptions(
                depends_on=[args.gateway, service, slice_, sources])),
            name=CATALOG_SERVICE, namespace_=VENDOR_CATALOG_NAMESPACE, gateway=GATEWAY, listener=ui.host,
            hostname=ui.hostname(args.domain), rules=catalog_route_rules(polaris),
        )
        self.url = pulumi.Output.from_input(f"https://{ui.hostname(args.domain)}{CATALOG_PATH.rstrip('/')}")
        self.register_outputs({"url": self.url})


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


VENDOR_CATALOG_FLOW = "vendor-catalog"
"""The flow that admits the compute ingress's proxies to Polaris, for the vendors' catalog route (`storage.vendors`)."""
VENDOR_S3_FLOW = "vendor-s3"
"""The flow that admits the vendors' own ranges (`storage.vendors.<name>.source_cidrs`) to the object store's S3 pods."""


def vendor_flows(site: SiteConfig) -> dict[str, Flow]:
    """While the site shares gold with vendors: the compute ingress's proxies to Polaris (the catalog route), and the
    vendors' own ranges, and no other address, to the object store's S3 pods (the external S3 VIP, which keeps the
    client's address)."""
    if not site.storage.vendors:
        return {}
    storage = site.keys_with_role("storage")
    store, polaris = site.storage.object_store, site.storage.polaris
    return {
        VENDOR_CATALOG_FLOW: Flow(
            description="The compute ingress forwards vendors' Iceberg REST calls (catalog.<domain>) to Polaris.",
            sources=site.keys_with_role("compute"), to=storage, port=polaris.port, to_namespace=polaris.namespace,
            from_namespace=GATEWAY_NAMESPACE, from_labels=ENVOY_PROXY_LABELS,
        ),
        VENDOR_S3_FLOW: Flow(
            description="Vendors read their gold tables through the external S3 VIP from their own ranges, with keys scoped "
            "to those tables.",
            from_cidrs=[str(cidr) for cidr in sorted({c for vendor in site.storage.vendors.values() for c in vendor.source_cidrs})],
            to=storage, port=store.s3_port, to_namespace=store.namespace, to_labels=store.s3_pod_labels,
        ),
    }
