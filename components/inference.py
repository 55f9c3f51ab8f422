"""InferencePool: vLLM per model behind one authenticated, rate-limited gateway VIP (DESIGN sections 1 and 2).

On the inference (gpu) cluster: per model a vLLM Deployment sized by `components.capacity`, scheduled
only on inference nodes at serving priority, its weights copied from the models bucket to the node's
NVMe cache with inference's read-only keys (over the Ethernet S3 endpoint; where the cluster loads
weights over InfiniBand, over IPoIB, the S3 host name resolved to the object store's IPoIB address),
a PodDisruptionBudget, a Service and an HTTPRoute, with a canary's Deployment and Service beside them: the
objects of components/serving.py, registered here under `inference.delivery: pulumi` and applied by Argo CD
from the serving repository under `argocd` (then this component keeps only the platform around them).
In front, one Envoy Gateway at a fixed internal VIP
(`externalTrafficPolicy: Local`), TLS, one HTTPRoute per model, each covered by a Keycloak JWT
SecurityPolicy that admits the site's teams only and by a per-team rate limit counted once across all
gateway replicas (a global limit). Each consuming team gets a client-credentials client whose tokens
carry its team.

Routing is by path (`/models/<model>/v1/...`, rewritten to `/v1/...`): Gateway API cannot match on the
request body, where the OpenAI API names the model. Body-based routing on one `/v1` needs Envoy AI
Gateway with an InferencePool endpoint picker, which Envoy Gateway alone does not provide. Within a model's route,
`inference.routing: inference-extension` lets the model's endpoint picker choose the replica (components/routing.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from components import routing, serving, versions
from components.config import AdoptConfig, InferenceConfig, names
from components.constants import (
    APP_LABEL,
    ENGINE_LABEL,
    ENVOY_HTTPS_PORT_NAME,
    GATEWAY_NAMESPACE,
    HTTPS_PORT,
    INFERENCE_GATEWAY_SERVICE,
    MONITORING_NAMESPACE,
    PROMETHEUS_POD_LABELS,
    SITE_CA_SECRET,
    VLLM_APP,
    SiteCa,
)
from components.gateway import ROUTES_LABEL, envoy_gateway, http_route, https_listener
from components.gitops import ServingTarget, serving_deployer
from components.gpu import INFERENCE_NAMESPACE, GpuCluster
from components.identity import SiteIdentity
from components.kube import Adoption, namespace
from components.metrics_sources import ENVOY_PROXY_POD_LABELS, OWNING_GATEWAY_LABEL
from components.network import CrossClusterNetwork, GlobalService
from components.network_policies import fence_policy
from components.providers import NamespaceRef, SiteRef
from components.serving import GATEWAY_NAME, PRINCIPAL, VLLM_PORT, route_prefix
from components.storage import StorageCluster

if TYPE_CHECKING:  # the sizing arithmetic is the config's to run (`SiteConfig.model_capacity`); here it is only a type
    from components.capacity import ModelCapacity

GATEWAY_CLASS = "fab-llm"
LISTENER = "https"
"""The gateway's one listener, which every model's route attaches to."""
TEAM_CLAIM = "team"
ACCESS_CLAIM = "llm_access"
"""A fixed claim only the teams' gateway clients carry, so that a token of another client is refused even if it names a team."""
TEAM_HEADER = "x-fab-team"
AUDIENCE = "llm-gateway"
JWT_PROVIDER = "keycloak"
JWKS_BACKEND = "keycloak-jwks"
"""The Envoy Gateway Backend (in each namespace with a JWT SecurityPolicy) that the JWKS fetch goes through while the site
has its own CA: Envoy Gateway fetches a bare `remoteJWKS.uri` trusting the system's CAs only (envoyproxy/gateway v1.9.0
api/v1alpha1/jwt_types.go), so the realm's keys signed by the site's PKI are fetched through a Backend that trusts it."""

__all__ = ["GATEWAY_NAME", "PRINCIPAL", "VLLM_PORT", "InferencePool", "InferencePoolArgs", "route_prefix"]


@dataclass(frozen=True)
class InferencePoolArgs:
    site: SiteRef
    """The site, whose domain names the gateway unless `inference.gateway.hostname` does."""
    config: InferenceConfig
    """The `inference` section: models, gateway, rate limits."""
    capacity: dict[str, ModelCapacity]
    """Each model's sizing under the active profile (`SiteConfig.model_capacity`)."""
    teams: list[str]
    """The teams, each of which gets a gateway client."""
    adopt: AdoptConfig
    """Declares the namespaces and gateway release that exist already."""
    network: CrossClusterNetwork
    storage: StorageCluster
    identity: SiteIdentity
    gpu: GpuCluster
    """The GpuCluster of the inference cluster: where the pool runs (its priority classes, NVMe class, IPoIB)."""
    api_server: str | None = None
    """URL of the inference cluster's API server, where Argo CD on compute applies the serving repository (delivery
    argocd); not needed otherwise."""
    rate_limit_saturation_percent: int | None = None
    """`observability.alerts.rate_limit_saturation_percent`: the rate limit service counts a team's hits above it as near
    its limit, which the rate-limit saturation alert reads (components/alerts.py). None without observability."""


class InferencePool(pulumi.ComponentResource):
    """Served models and the one gateway in front of them."""

    serving: pulumi.Output[dict[str, Any]]
    """The serving URL contract: gateway URL, DNS name, VIP and each model's base URL."""
    capacity: pulumi.Output[dict[str, Any]]
    """Per model: tensor parallel size, replicas, GPUs, weights and KV cache per GPU."""
    dns_records: pulumi.Output[dict[str, str]]
    """The A record the site's DNS must hold for the serving URL."""

    def __init__(self, name: str, args: InferencePoolArgs, opts: pulumi.ResourceOptions | None = None):
        inference = args.config
        self._name, self._config, self._teams = name, inference, args.teams
        self._served: dict[str, serving.ServedModel] = {}
        self._cluster = args.gpu.cluster.key
        self._registry = args.gpu.cluster.registry
        self._adopt = Adoption(args.adopt, self._cluster)
        self._near_limit_percent = args.rate_limit_saturation_percent
        super().__init__(
            "fab:inference:InferencePool", name, None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.gpu.cluster.provider])),
        )
        hostname = inference.gateway.hostname or names.GATEWAY_HOST(args.site.domain)
        sized = args.capacity
        self._models_bucket = args.storage.bucket_of("models")

        namespace = self._namespace_resource = self._namespace(INFERENCE_NAMESPACE)
        self._fence(namespace, args.network.cilium_releases.get(self._cluster))
        here = NamespaceRef(args.gpu.cluster, INFERENCE_NAMESPACE, namespace)
        s3 = args.storage.grant(PRINCIPAL, here)
        ca = args.storage.site_ca(here)
        self._cas: dict[str, SiteCa] = {INFERENCE_NAMESPACE: ca}
        """The site CA's Secret in each namespace with JWT policies (the gateway's joins when it exists)."""
        self._jwks_backends: dict[str, pulumi.Resource] = {}
        self.site = serving.ServingSite(
            hostname=hostname,
            models_bucket=args.storage.bucket_of("models"),
            gpu_memory_utilization=inference.gpu_memory_utilization,
            site_ca=ca.secret is not None,
            # Over InfiniBand, the weight sync reaches the object store at its IPoIB address under the S3 host name.
            s3_ipoib=(args.gpu.s3_ipoib_address, args.storage.s3_host) if args.gpu.s3_ipoib_address else None,
            registry=self._registry,
        )
        """What every model is served with: `fabctl serving render` builds the same objects from it."""
        served = self._served = {model: serving.ServedModel(model, spec, sized[model]) for model, spec in sorted(inference.models.items())}
        delivered = inference.delivery == "pulumi"
        self.deployments: dict[str, k8s.apps.v1.Deployment] = {
            # A serving pod needs its namespace, what the GPU cluster gives it (GpuCluster.serving_needs), and the S3 keys and
            # site CA its weight copy uses when it starts.
            model: self._model(model, [namespace, *args.gpu.serving_needs, s3, *ca.resources()]) for model in served
        } if delivered else {}
        """Each model's vLLM Deployment (`self.deployments[model]`), none when Argo CD delivers them."""

        self.gateway_global_service = GlobalService(
            INFERENCE_GATEWAY_SERVICE, GATEWAY_NAMESPACE, ((ENVOY_HTTPS_PORT_NAME, HTTPS_PORT),),
        ) if args.network.global_services else None
        """The gateway's Envoy pods as a ClusterMesh global service (a Service beside Envoy Gateway's own), which compute repeats; None without global services.
        Its backends run on this cluster only, so it has no affinity to prefer."""
        gateway = self._gateway(args.network, hostname, backends=ca.secret is not None)
        self._cas[GATEWAY_NAMESPACE] = args.storage.site_ca(NamespaceRef(args.gpu.cluster, GATEWAY_NAMESPACE, gateway))
        team_clients = self._team_clients(args.identity)
        if not delivered:
            # the policies' CRDs come with Envoy Gateway's chart, which the gateway waits for
            self._gateway_policies([gateway], args.identity)
        pickers = self._endpoint_pickers(namespace) if inference.routing == "inference-extension" else {}
        for model in served:
            # Authentication and rate limits exist before the route: a route is never served without them. Under Argo CD
            # they exist before its first sync, which the Application follows (docs/operations.md).
            # The policies' CRDs come with Envoy Gateway's chart, which the gateway waits for; they go in the namespace.
            policies = self._policies(model, [gateway, namespace], args.identity, picker=pickers.get(model))
            if delivered:
                # The route attaches to the gateway's listener (the Gateway API CRDs come with its chart) and comes after
                # the policies, so that it is never served without them. Not after the Deployment (the model's load): the
                # route names the model's Services, not pods, and answers 503 until they have ready endpoints, as it does
                # whenever every replica restarts.
                self._route(model, [gateway, *policies])

        base = f"https://{hostname}"
        self.serving = pulumi.Output.from_input(
            {
                "url": base,
                "hostname": hostname,
                "vip": str(inference.gateway.vip),
                "models": {
                    model: {"base_url": f"{base}{route_prefix(model)}", "served_name": spec.served_name or model}
                    for model, spec in sorted(inference.models.items())
                },
                "token_url": f"{args.identity.issuer}/protocol/openid-connect/token",
                "team_clients": {team: f"inference-{team}" for team in sorted(team_clients)},
            }
        )
        self.capacity = pulumi.Output.from_input(
            {
                model: {
                    "tensor_parallel": c.tensor_parallel,
                    "replicas": c.replicas,
                    "gpus": c.gpus,
                    "weights_per_gpu_gib": round(c.weights_per_gpu_gib, 1),
                    "kv_cache_per_gpu_gib": round(c.kv_budget_per_gpu_gib, 1),
                    "kv_bytes_per_token": c.kv_bytes_per_token,
                    "max_context_sequences_per_replica": c.max_context_sequences,
                    "sequences_per_replica": c.sequences_per_replica,
                }
                for model, c in sorted(sized.items())
            }
        )
        self.dns_records = pulumi.Output.from_input({hostname: str(inference.gateway.vip)})
        # With delivery argocd, Argo CD on compute applies the serving objects here, as the account serving_deployer makes.
        if inference.delivery == "argocd" and not args.api_server:
            raise ValueError("InferencePoolArgs.api_server is required with inference.delivery argocd: Argo CD reaches it")
        self.serving_target = ServingTarget(
            cluster=args.gpu.cluster, api_server=args.api_server, namespace=INFERENCE_NAMESPACE,
            token=serving_deployer(name, args.gpu.cluster, namespace, pulumi.ResourceOptions(parent=self)),
            models=sorted(inference.models),
        ) if inference.delivery == "argocd" else None
        self.register_outputs({"serving": self.serving, "capacity": self.capacity, "dns_records": self.dns_records})

    @property
    def served_models(self) -> dict[str, serving.ServedModel]:
        """Each served model with its sizing, by key (what offline batch inference runs too)."""
        return dict(self._served)

    def _namespace(self, name: str) -> k8s.core.v1.Namespace:
        # Its workloads (the vLLM Deployments) run as the inference principal and read its S3 keys only.
        return namespace(f"{self._name}-ns-{name}", name, pulumi.ResourceOptions(parent=self),
                         labels={ROUTES_LABEL: GATEWAY_NAME, ENGINE_LABEL: PRINCIPAL}, adopt=self._adopt, registry=self._registry)

    def _fence(self, namespace: k8s.core.v1.Namespace, cilium: pulumi.Resource | None) -> None:
        """vLLM answers anyone who reaches its port, without a token or a limit: only the gateway stands for them."""
        obj = vllm_fence(self._config.routing == "inference-extension")
        k8s.apiextensions.CustomResource(
            f"{self._name}-vllm-fence", api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"],
            spec=obj["spec"],
            # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD (before any model is served)
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, *([cilium] if cilium else [])]),
        )

    # ---------------------------------------------------------------------------------------------
    # Models.

    def _model(self, model: str, depends_on: list[pulumi.Resource]) -> k8s.apps.v1.Deployment:
        """A model's serving objects (components/serving.py) as Pulumi resources: its Deployment, PodDisruptionBudget and
        Service, and with a canary the canary's Deployment and Service."""
        served = self._served[model]
        child = pulumi.ResourceOptions(parent=self)

        def register(logical: str, obj: dict[str, Any], after: list[pulumi.Resource],
                     more: pulumi.ResourceOptions | None = None) -> pulumi.CustomResource:
            kinds = {"Deployment": k8s.apps.v1.Deployment, "Service": k8s.core.v1.Service,
                     "PodDisruptionBudget": k8s.policy.v1.PodDisruptionBudget}
            opts = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=after))
            return kinds[obj["kind"]](logical, metadata=obj["metadata"], spec=obj["spec"], opts=pulumi.ResourceOptions.merge(opts, more))

        def rollout(canary: bool = False) -> pulumi.ResourceOptions:
            # Pulumi waits for the rollout (10 minutes by default): as long as the image pull, the weights' download and
            # vLLM's startup budget take, for each replica in turn on an update (serving.rollout_timeouts).
            create, update = serving.rollout_timeouts(served, canary=canary)
            return pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=f"{create}m", update=f"{update}m"))

        prefix = f"{self._name}-vllm-{model}"
        deployment = register(prefix, serving.deployment(self.site, served), depends_on, rollout())
        # A PodDisruptionBudget and a Service select pods by label and need none to exist: only the namespace.
        register(f"{prefix}-pdb", serving.disruption_budget(model), [self._namespace_resource])
        # pulumi-kubernetes waits for a Service's selected pods once any exist: as long as for the Deployment, which may be
        # rolling when the Service is created (a canary added to a running site).
        register(f"{prefix}-svc", serving.service(model), [self._namespace_resource], rollout())
        if served.spec.canary is not None:
            register(f"{prefix}-canary", serving.deployment(self.site, served, canary=True), depends_on, rollout(canary=True))
            register(f"{prefix}-canary-svc", serving.service(model, canary=True), [self._namespace_resource], rollout(canary=True))
        return deployment

    # ---------------------------------------------------------------------------------------------
    # Gateway.

    def _gateway(self, network: CrossClusterNetwork, hostname: str, backends: bool) -> k8s.apiextensions.CustomResource:
        gateway_cfg = self._config.gateway
        opts = pulumi.ResourceOptions(parent=self)
        gateway = envoy_gateway(
            self._name, opts,
            adopt=self._adopt,
            gateway=GATEWAY_NAME,
            gateway_class=GATEWAY_CLASS,
            description="The site's inference gateway.",
            service_labels=network.lb_service_labels(self._cluster, gateway_cfg.pool),
            vip=str(gateway_cfg.vip),
            listeners=[https_listener(LISTENER, hostname, gateway_cfg.tls_secret, GATEWAY_NAME)],
            registry=self._registry,
            global_rate_limits=True,
            near_limit_percent=self._near_limit_percent,
            service=self.gateway_global_service,
            backends=backends,
            cilium=network.cilium_releases.get(self._cluster),
        )
        # The team header is only ever set from a verified token: strip whatever the client sent. Under model-aware
        # routing, so is the picked endpoint, which only the endpoint picker sets (it overwrites it anyway).
        stripped = [TEAM_HEADER, *([routing.DESTINATION_HEADER] if self._config.routing == "inference-extension" else [])]
        k8s.apiextensions.CustomResource(
            f"{self._name}-client-headers",
            api_version=versions.ENVOY_GATEWAY_API,
            kind="ClientTrafficPolicy",
            metadata={"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
            spec={
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}],
                "headers": {"earlyRequestHeaders": {"remove": stripped}},
            },
            # the gateway comes after Envoy Gateway's chart, which installs the ClientTrafficPolicy CRD
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
        )
        return gateway

    def _route(self, model: str, after: list[pulumi.Resource]) -> k8s.apiextensions.CustomResource:
        return http_route(
            f"{self._name}-route-{model}",
            pulumi.ResourceOptions(parent=self, depends_on=after),
            name=names.VLLM(model), namespace_=INFERENCE_NAMESPACE, gateway=GATEWAY_NAME, listener=LISTENER,
            hostname=self.site.hostname, rules=serving.route_rules(self._served[model]),
        )

    def _policies(self, model: str, after: list[pulumi.Resource], identity: SiteIdentity,
                  picker: pulumi.Resource | None = None) -> list[pulumi.Resource]:
        """Every route: a Keycloak JWT for this gateway from one of the site's teams, and that team's rate limit.

        With the model's endpoint picker (`picker`, model-aware routing), also the EnvoyExtensionPolicy that asks it, and
        the rate limits' BackendTrafficPolicy sends each request to the pod it picked (components/routing.py). The
        policies name the route they attach to; Envoy Gateway attaches them when it appears.
        """
        target = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": names.VLLM(model)}
        policies = self._access_policies(lambda kind: f"{self._name}-{kind}-{model}", names.VLLM(model), INFERENCE_NAMESPACE,
                                         target, after, identity,
                                         load_balancer=routing.endpoint_override() if picker is not None else None)
        if picker is not None:
            obj = routing.extension_policy(model)
            policies.append(k8s.apiextensions.CustomResource(
                f"{self._name}-extproc-{model}", api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"],
                # the policy sends every request to the picker's Service first
                spec=obj["spec"], opts=pulumi.ResourceOptions(parent=self, depends_on=[*after, picker]),
            ))
        return policies

    def _endpoint_pickers(self, namespace: k8s.core.v1.Namespace) -> dict[str, pulumi.Resource]:
        """Model-aware routing: the Inference Extension's CRDs, then per model its InferencePool and endpoint picker
        (components/routing.py); returns each model's picker Service, by model. A model with a canary has none while the
        canary runs: the picker would choose among the stable replicas only and starve the canary of its share."""
        child = pulumi.ResourceOptions(parent=self)
        crds = routing.inference_pool_crds(self._name, child, self._registry)
        # the pickers and pools go in the namespace; `crds` installs the InferencePool CRD
        after = pulumi.ResourceOptions(parent=self, depends_on=[namespace, crds])
        pickers: dict[str, pulumi.Resource] = {}
        for model, served in self._served.items():
            if served.spec.canary is not None:
                continue
            service: pulumi.Resource | None = None
            for obj in routing.endpoint_picker(model, self._registry):
                logical = f"{self._name}-epp-{model}-{obj['kind'].lower()}"
                if obj["kind"] == "InferencePool":
                    k8s.apiextensions.CustomResource(logical, api_version=obj["apiVersion"], kind=obj["kind"],
                                                     metadata=obj["metadata"], spec=obj["spec"], opts=after)
                    continue
                resource = _register(logical, obj, after)
                if obj["kind"] == "Service":
                    service = resource
            assert service is not None
            pickers[model] = service
        return pickers

    def _gateway_policies(self, after: list[pulumi.Resource], identity: SiteIdentity) -> list[pulumi.Resource]:
        """The same policies on the whole gateway, for the routes Argo CD applies from Git: a route the serving repository
        holds for a model the stack does not know has no policy of its own, and gets these (Envoy Gateway applies a
        Gateway's policy to each of its routes that has none of its own kind)."""
        target = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}
        return self._access_policies(lambda kind: f"{self._name}-gateway-{kind}", GATEWAY_NAME, GATEWAY_NAMESPACE,
                                     target, after, identity)

    def _access_policies(self, logical: Any, name: str, namespace_: str, target: dict[str, str], after: list[pulumi.Resource],
                         identity: SiteIdentity, load_balancer: dict[str, Any] | None = None) -> list[pulumi.Resource]:
        opts = pulumi.ResourceOptions(parent=self, depends_on=after)
        teams = sorted(self._teams)

        def policy(role: str, kind: str, spec: dict[str, Any]) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                logical(role), api_version=versions.ENVOY_GATEWAY_API, kind=kind,
                metadata={"name": name, "namespace": namespace_}, spec={"targetRefs": [target], **spec}, opts=opts,
            )

        issuer = identity.issuer
        backend = self._jwks_backend(namespace_, issuer, after)
        if backend is not None:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[backend]))
        jwt = policy(
            "jwt", "SecurityPolicy",
            {
                "jwt": {
                    "providers": [
                        {
                            "name": JWT_PROVIDER,
                            "issuer": issuer,
                            "audiences": [AUDIENCE],
                            "remoteJWKS": jwks(issuer, backend is not None),
                            "claimToHeaders": [{"header": TEAM_HEADER, "claim": TEAM_CLAIM}],
                        }
                    ]
                },
                # Only the teams' gateway clients, and only for a team of the site: every admitted request carries the
                # team header the rate limits below count by.
                "authorization": {"defaultAction": "Deny", "rules": team_allow_rules(teams)},
            },
        )
        # One BackendTrafficPolicy per route: Envoy Gateway applies one of a kind per target, so the endpoint override of
        # model-aware routing joins the rate limits here.
        traffic = {"rateLimit": team_rate_limits(self._config), **({"loadBalancer": load_balancer} if load_balancer else {})}
        return [jwt, policy("ratelimit", "BackendTrafficPolicy", traffic)]

    def _jwks_backend(self, namespace_: str, issuer: str, after: list[pulumi.Resource]) -> pulumi.Resource | None:
        """The Backend the JWKS fetch of the namespace's JWT policies goes through, trusting the site CA's Secret there;
        None without a site CA (the system's CAs then verify Keycloak). One per namespace: a policy's backendRefs name a
        Backend of its own namespace."""
        ca = self._cas[namespace_]
        if ca.secret is None:
            return None
        if namespace_ not in self._jwks_backends:
            self._jwks_backends[namespace_] = k8s.apiextensions.CustomResource(
                f"{self._name}-jwks-backend-{namespace_}", api_version=versions.ENVOY_GATEWAY_API, kind="Backend",
                metadata={"name": JWKS_BACKEND, "namespace": namespace_}, spec=jwks_backend(issuer),
                # the Backend CRD comes with Envoy Gateway's chart (`after` holds the gateway, which waits for it); the CA's
                # Secret must be there for Envoy Gateway to accept the Backend's TLS
                opts=pulumi.ResourceOptions(parent=self, depends_on=[*after, *ca.resources()]),
            )
        return self._jwks_backends[namespace_]

    def _team_clients(self, identity: SiteIdentity) -> dict[str, Any]:
        """A client-credentials client per team whose tokens carry `team` and the gateway's audience."""
        return {
            team: identity.oidc_client(
                names.TEAM_GATEWAY_CLIENT(team), "service", description=f"Inference gateway client of team {team}",
                audience=AUDIENCE, claims={TEAM_CLAIM: team, ACCESS_CLAIM: "true"},
            )
            for team in sorted(self._teams)
        }


VLLM_FENCE = "vllm"


def vllm_fence(endpoint_pickers: bool) -> dict[str, Any]:
    """The CiliumNetworkPolicy that refuses every vLLM pod (stable and canary) to every pod of the cluster but the
    gateway's proxies, which authenticate and rate-limit each request, the models' endpoint pickers, which read the pods'
    metrics to pick one (`endpoint_pickers`, model-aware routing), and Prometheus, which scrapes them. A team's pod, a GPU
    notebook or a Job on the GPU cluster reaches a model only through the gateway, with a token, within its limit."""
    sources: dict[str, dict[str, list[str]]] = {
        GATEWAY_NAMESPACE: {APP_LABEL: [ENVOY_PROXY_POD_LABELS[APP_LABEL]], OWNING_GATEWAY_LABEL: [GATEWAY_NAME]},
        MONITORING_NAMESPACE: {APP_LABEL: [PROMETHEUS_POD_LABELS[APP_LABEL]]},
    }
    if endpoint_pickers:
        sources[INFERENCE_NAMESPACE] = {"app.kubernetes.io/component": [routing.EPP_COMPONENT]}
    return fence_policy(VLLM_FENCE, INFERENCE_NAMESPACE, "vLLM: only the gateway's proxies, the endpoint pickers and "
                        "Prometheus reach the model servers; everyone else goes through the gateway.",
                        {APP_LABEL: VLLM_APP}, sources)


def _register(logical: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One of an endpoint picker's core objects as its typed Pulumi resource."""
    meta = obj["metadata"]
    kind = obj["kind"]
    if kind == "ServiceAccount":
        return k8s.core.v1.ServiceAccount(logical, metadata=meta, opts=opts)
    if kind == "Role":
        return k8s.rbac.v1.Role(logical, metadata=meta, rules=obj["rules"], opts=opts)
    if kind == "RoleBinding":
        return k8s.rbac.v1.RoleBinding(logical, metadata=meta, subjects=obj["subjects"], role_ref=obj["roleRef"], opts=opts)
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(logical, metadata=meta, data=obj["data"], opts=opts)
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(logical, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(logical, metadata=meta, spec=obj["spec"], opts=opts)
    raise ValueError(f"no resource type for {kind}")


def jwks(issuer: str, via_backend: bool) -> dict[str, Any]:
    """A JWT provider's `remoteJWKS`: the realm's keys, fetched through the `JWKS_BACKEND` that trusts the site CA while
    the site has one (`via_backend`), else straight from the URI with the system's CAs."""
    remote: dict[str, Any] = {"uri": f"{issuer}/protocol/openid-connect/certs"}
    if via_backend:
        remote["backendRefs"] = [{"group": "gateway.envoyproxy.io", "kind": "Backend", "name": JWKS_BACKEND, "port": _port(issuer)}]
    return remote


def jwks_backend(issuer: str) -> dict[str, Any]:
    """The spec of the JWKS Backend: the issuer's host (an FQDN endpoint), verified against the site CA's Secret in the
    Backend's namespace (key `ca.crt`, which Envoy Gateway reads) with the host as SNI."""
    host = urlsplit(issuer).hostname or ""
    return {
        "endpoints": [{"fqdn": {"hostname": host, "port": _port(issuer)}}],
        "tls": {"caCertificateRefs": [{"group": "", "kind": "Secret", "name": SITE_CA_SECRET}], "sni": host},
    }


def _port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


CLAIM_VALUES_MAX = 128
"""Values one Envoy Gateway authorization claim may list; more teams take more Allow rules."""


def team_allow_rules(teams: list[str]) -> list[dict[str, Any]]:
    """Allow rules admitting the tokens of the teams' gateway clients: `llm_access` and a `team` claim naming a team,
    `CLAIM_VALUES_MAX` teams per rule (`team-clients`, then `team-clients-2`, ...)."""
    chunks = [teams[i:i + CLAIM_VALUES_MAX] for i in range(0, len(teams), CLAIM_VALUES_MAX)]
    return [
        {
            "name": "team-clients" if n == 1 else f"team-clients-{n}",
            "action": "Allow",
            "principal": {"jwt": {"provider": JWT_PROVIDER, "claims": [
                {"name": ACCESS_CLAIM, "values": ["true"]},
                {"name": TEAM_CLAIM, "values": chunk},
            ]}},
        }
        for n, chunk in enumerate(chunks, start=1)
    ]


def _team_header(**match: Any) -> dict[str, Any]:
    return {"name": TEAM_HEADER, **match}


def team_rate_limits(config: InferenceConfig) -> dict[str, Any]:
    """A route's `rateLimit`: each team's requests per minute, counted once across all gateway replicas.

    Every team gets a bucket of its own at the default rate (one `Distinct` rule on the team header, so adding a
    team at the default changes nothing here), except the teams with their own rate, which have a rule each.
    `global` is the limit, counted by Envoy Gateway's rate limit service. `local` holds the same rules as the
    backstop for when that service does not answer (the gateway then fails open): each proxy counts them on its
    own, so a team gets at most its rate times the proxy replicas, never unlimited.
    """
    overrides = config.team_requests_per_minute

    def per_minute(rpm: int) -> dict[str, Any]:
        return {"requests": rpm, "unit": "Minute"}

    default_rule = {
        "clientSelectors": [{"headers": [
            _team_header(type="Distinct"),
            *(_team_header(type="Exact", value=team, invert=True) for team in sorted(overrides)),
        ]}],
        "limit": per_minute(config.requests_per_minute),
    }
    override_rules = [
        {"clientSelectors": [{"headers": [_team_header(type="Exact", value=team)]}], "limit": per_minute(rpm)}
        for team, rpm in sorted(overrides.items())
    ]
    rules = [default_rule, *override_rules]
    return {"global": {"rules": rules}, "local": {"rules": copy.deepcopy(rules)}}
