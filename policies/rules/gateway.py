"""Rules on the inference gateway (DESIGN section 1: "authenticated with Keycloak-issued JWTs and rate-limited per
team"): whom the JWT SecurityPolicy of each GPU-cluster HTTPRoute trusts (the site realm's issuer and keys, an
audience), whom it admits (known teams only, everything else denied), and each team's rate limit, counted once across
all gateway replicas by a rate limit service that the cluster runs.

The site's realm, its issuer and its teams are read off the plan, from the objects the program registers in Keycloak
(the SiteIdentity's realm, its provider's URL, the team claim its clients carry), never from settings: a new site is
checked against its own realm and teams. Covering a route means naming it in `targetRefs`; a route no policy covers is
`fab-routes-authenticated`'s finding, not these rules'.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any
from urllib.parse import urlsplit

from pulumi_policy import ReportViolation, StackValidationArgs

from rules._k8s import (
    HELM_RELEASE,
    UNKNOWN,
    chart_name,
    field,
    gpu_providers,
    name_of,
    namespace_of,
    objects,
    plain,
    provider_name,
    top_component,
    undecided,
)
from rules._policy import stack_rule

IDENTITY_COMPONENT = "fab:identity:SiteIdentity"
KEYCLOAK_REALM = "keycloak:index/realm:Realm"
CLAIM_MAPPER = "keycloak:openid/hardcodedClaimProtocolMapper:HardcodedClaimProtocolMapper"
ENVOY_GATEWAY_CHART = "gateway-helm"
TEAM_CLAIM = "team"
TEAM_CLAIM_SETTING = {"teamClaim": {"type": "string", "default": TEAM_CLAIM,
                                    "description": "the JWT claim that names a caller's team (set by the teams' Keycloak clients)"}}
JWKS_PATH = "/protocol/openid-connect/certs"
"""Where Keycloak serves a realm's signing keys, under the realm's issuer URL."""


# -------------------------------------------------------------------------------------------------
# What the plan says about the site's realm, its teams and the gateway's routes.

def site_issuer(resources: list[Any]) -> tuple[str | None, str]:
    """The site realm's OIDC issuer as the SiteIdentity registers it (`<its Keycloak provider's url>/realms/<realm>`),
    or None and why it can't be derived."""
    identity = [r for r in resources
                if r.resource_type.startswith("keycloak:") and getattr(top_component(r), "resource_type", "") == IDENTITY_COMPONENT]
    if not identity:
        return None, "the plan has no Keycloak object of a SiteIdentity"
    urls = {plain(r.provider.props).get("url") if r.provider is not None else None for r in identity}
    if len(urls) != 1 or not all(isinstance(u, str) and u for u in urls):
        shown = ", ".join(sorted(repr(u) for u in urls))
        return None, f"the SiteIdentity's Keycloak provider URL is not one known value ({shown})"
    created = [plain(r.props).get("realm") for r in identity if r.resource_type == KEYCLOAK_REALM]
    realms = set(created) if created else {plain(r.props).get("realmId") for r in identity} - {None}
    if len(realms) != 1 or not all(isinstance(realm, str) and realm for realm in realms):
        shown = ", ".join(sorted(repr(realm) for realm in realms)) or "none"
        return None, f"the SiteIdentity's realm is not one known name ({shown})"
    (url,), (realm,) = urls, realms
    return f"{str(url).rstrip('/')}/realms/{realm}", ""


def site_teams(resources: list[Any], claim: str, report: ReportViolation) -> set[str]:
    """The teams the site's Keycloak clients name in `claim` (hard-coded claim mappers of the SiteIdentity); a mapper
    whose claim name or value is unknown is reported (fail closed) and left out."""
    teams = set()
    for r in resources:
        if r.resource_type != CLAIM_MAPPER or getattr(top_component(r), "resource_type", "") != IDENTITY_COMPONENT:
            continue
        props = plain(r.props)
        deciding = {"claimName": props.get("claimName"), "claimValue": props.get("claimValue")}
        if problem := undecided(f"Keycloak claim mapper {r.name}", deciding):
            report(problem, r.urn)
        elif deciding["claimName"] == claim and isinstance(deciding["claimValue"], str):
            teams.add(deciding["claimValue"])
    return teams


@dataclass
class Route:
    """An HTTPRoute on a GPU cluster and the Envoy Gateway policies whose targetRefs name it."""

    resource: Any
    cluster: str
    namespace: str
    name: str
    security: list[tuple[Any, dict[str, Any]]] = dataclass_field(default_factory=list)
    traffic: list[tuple[Any, dict[str, Any]]] = dataclass_field(default_factory=list)

    @property
    def where(self) -> str:
        return f"HTTPRoute {self.namespace}/{self.name} on {self.cluster}"


POLICY_KINDS = ("SecurityPolicy", "BackendTrafficPolicy")


def gpu_routes(resources: list[Any], report: ReportViolation) -> list[Route]:
    """Every HTTPRoute on a GPU cluster with the SecurityPolicies and BackendTrafficPolicies that name it; a route or
    policy whose name, namespace or targets are unknown is reported (fail closed) and left out."""
    gpu = gpu_providers(resources)
    routes: list[Route] = []
    policies: dict[tuple[str, str, Any], dict[str, list[tuple[Any, dict[str, Any]]]]] = defaultdict(lambda: defaultdict(list))
    for resource, obj in objects(resources):
        kind, cluster = obj["kind"], provider_name(resource)
        if kind not in ("HTTPRoute", *POLICY_KINDS) or cluster not in gpu:
            continue
        deciding: dict[str, Any] = {"name": field(obj, "metadata", "name"), "namespace": field(obj, "metadata", "namespace")}
        if kind != "HTTPRoute":
            deciding["targetRefs"] = field(obj, "spec", "targetRefs")
        if problem := undecided(f"{kind} {namespace_of(obj)}/{name_of(obj)} on {cluster}", deciding):
            report(problem, resource.urn)
            continue
        if kind == "HTTPRoute":
            routes.append(Route(resource, cluster, namespace_of(obj), name_of(obj)))
            continue
        for target in deciding["targetRefs"] or []:
            if isinstance(target, dict) and target.get("kind") == "HTTPRoute":
                policies[(cluster, namespace_of(obj), target.get("name"))][kind].append((resource, obj))
    planned = {(route.cluster, route.namespace, route.name) for route in routes}
    for key in sorted(set(policies) - planned, key=str):
        # A route Argo CD applies from the serving repository (`inference.delivery: argocd`) is not in the plan; the
        # policies that name it are, and are held to the same rules. It is reported on its first policy.
        cluster, namespace, name = key
        routes.append(Route(next(iter(policies[key].values()))[0][0], cluster, namespace, name))
    for route in routes:
        attached = policies.get((route.cluster, route.namespace, route.name), {})
        route.security, route.traffic = attached.get("SecurityPolicy", []), attached.get("BackendTrafficPolicy", [])
    return routes


def covering_security_policies(resources: list[Any], report: ReportViolation) -> list[tuple[Any, dict[str, Any], str]]:
    """(resource, object, "SecurityPolicy ns/name on cluster") of every SecurityPolicy covering a GPU-cluster route, once."""
    seen: dict[str, tuple[Any, dict[str, Any], str]] = {}
    for route in gpu_routes(resources, report):
        for resource, obj in route.security:
            seen.setdefault(resource.urn, (resource, obj, f"SecurityPolicy {namespace_of(obj)}/{name_of(obj)} on {route.cluster}"))
    return [seen[urn] for urn in sorted(seen)]


def jwt_providers(obj: dict[str, Any]) -> Any:
    """The JWT providers of a SecurityPolicy (UNKNOWN where unknown), each a dict."""
    providers = field(obj, "spec", "jwt", "providers")
    return providers if providers is UNKNOWN else [p for p in providers or [] if isinstance(p, dict)]


# -------------------------------------------------------------------------------------------------
# Whom the gateway trusts and admits.

def _each_provider(args: StackValidationArgs, report: ReportViolation, keys: tuple[str, ...], check: Any,
                   needs_issuer: bool = True) -> None:
    """Run `check(where, provider, issuer, report)` on every JWT provider of every covering SecurityPolicy, with the site
    realm's issuer; fail closed where the provider's deciding `keys` are unknown, or the issuer can't be derived and the
    check `needs_issuer`."""
    issuer, why = site_issuer(args.resources) if needs_issuer else ("", "")
    for resource, obj, where in covering_security_policies(args.resources, report):
        providers = jwt_providers(obj)
        if providers is UNKNOWN or not providers:
            if problem := undecided(where, providers, ".spec.jwt.providers"):
                report(problem, resource.urn)
            continue
        if issuer is None:
            report(f"{where}: the site realm's issuer can't be derived from the plan ({why}), so this rule fails closed",
                   resource.urn)
            continue
        for i, provider in enumerate(providers):
            if problem := undecided(where, {k: provider.get(k) for k in keys}, f".spec.jwt.providers[{i}]"):
                report(problem, resource.urn)
            else:
                check(where, provider, issuer, lambda message, urn=resource.urn: report(message, urn))


@stack_rule("fab-gateway-jwt-issuer",
            "Every JWT provider of a SecurityPolicy covering a GPU-cluster HTTPRoute trusts the site realm's issuer only.",
            place=80,
            docs="every JWT provider of a SecurityPolicy covering a GPU-cluster HTTPRoute trusts only the site realm's issuer, "
                 "`<Keycloak URL>/realms/<realm>` as the SiteIdentity registers them (fails closed where the plan does not tell)")
def gateway_jwt_issuer(args: StackValidationArgs, report: ReportViolation) -> None:
    """The issuer is `<Keycloak URL>/realms/<realm>` of the SiteIdentity in the plan; where that can't be derived, the
    rule fails closed. Unknown values: a provider whose issuer is unknown fails closed."""

    def check(where: str, provider: dict[str, Any], issuer: str, found: Any) -> None:
        got = provider.get("issuer")
        if got != issuer:
            trusts = f"trusts issuer {got}" if got else "checks no issuer, so it trusts any"
            found(f"{where}: JWT provider {provider.get('name')} {trusts}; only the site realm's issuer {issuer} is allowed")

    _each_provider(args, report, ("issuer",), check)


@stack_rule("fab-gateway-jwt-jwks",
            "Every JWT provider of a SecurityPolicy covering a GPU-cluster HTTPRoute verifies tokens with the site realm's "
            "published keys (its JWKS URI).",
            place=90,
            docs="those JWT providers fetch their keys from the site realm's JWKS (`<issuer>/protocol/openid-connect/certs`); no "
                 "keys written into the policy")
def gateway_jwt_jwks(args: StackValidationArgs, report: ReportViolation) -> None:
    """Keys written into the policy (`localJWKS`) are refused: they do not rotate with the realm, and they may be
    anyone's. Unknown values: a provider whose key source is unknown fails closed."""

    def check(where: str, provider: dict[str, Any], issuer: str, found: Any) -> None:
        expected = f"{issuer}{JWKS_PATH}"
        uri = field(provider, "remoteJWKS", "uri")
        if provider.get("localJWKS") is not None:
            found(f"{where}: JWT provider {provider.get('name')} verifies with keys written into the policy (localJWKS); "
                  f"only the site realm's keys {expected} are allowed")
        elif uri != expected:
            found(f"{where}: JWT provider {provider.get('name')} fetches its keys from {uri}; only the site realm's keys "
                  f"{expected} are allowed")

    _each_provider(args, report, ("remoteJWKS", "localJWKS"), check)


@stack_rule("fab-gateway-jwt-audience",
            "Every JWT provider of a SecurityPolicy covering a GPU-cluster HTTPRoute checks the token's audience.",
            place=100,
            docs="those JWT providers check an audience")
def gateway_jwt_audience(args: StackValidationArgs, report: ReportViolation) -> None:
    """Without audiences, a token the realm issued to any client (a UI's, a pipeline's) is accepted at the gateway.
    Unknown values: a provider whose audiences are unknown fails closed."""

    def check(where: str, provider: dict[str, Any], issuer: str, found: Any) -> None:
        audiences = provider.get("audiences")
        if not isinstance(audiences, list) or not audiences or not all(isinstance(a, str) and a for a in audiences):
            found(f"{where}: JWT provider {provider.get('name')} checks no audience (audiences {audiences!r}), so a token "
                  "the realm issued to any client is accepted; list the gateway's audience")

    _each_provider(args, report, ("audiences",), check, needs_issuer=False)


@stack_rule("fab-gateway-default-deny",
            "Every SecurityPolicy covering a GPU-cluster HTTPRoute denies by default and allows only tokens whose team claim "
            "names a team of the site.",
            settings=TEAM_CLAIM_SETTING,
            place=110,
            docs="those SecurityPolicies deny by default, and every Allow rule requires the team claim with teams of the site "
                 "(the values the site's Keycloak clients carry)")
def gateway_default_deny(args: StackValidationArgs, report: ReportViolation) -> None:
    """The teams are the values of the team claim the site's Keycloak clients carry; with none in the plan the rule fails
    closed. An Allow rule must require that claim, from a JWT provider of the same policy, with known teams only.
    Unknown values: a policy whose authorization or JWT providers are unknown fails closed."""
    claim = args.get_config().get("teamClaim", TEAM_CLAIM)
    teams = site_teams(args.resources, claim, report)
    for resource, obj, where in covering_security_policies(args.resources, report):
        authorization, providers = field(obj, "spec", "authorization"), jwt_providers(obj)
        names = providers if providers is UNKNOWN else [p.get("name") for p in providers]
        if problem := undecided(where, {"authorization": authorization, "providers": names}):
            report(problem, resource.urn)
            continue
        if not isinstance(authorization, dict):
            report(f"{where} has no authorization, so every valid token of the realm is admitted; deny by default and allow "
                   f"the teams' tokens by their {claim} claim", resource.urn)
            continue
        action = authorization.get("defaultAction")
        if action != "Deny":
            report(f"{where}: authorization's defaultAction is {action!r}; only 'Deny' is allowed, so that a client no rule "
                   "admits is refused", resource.urn)
        if not teams:
            report(f"{where}: no Keycloak client of the site carries the {claim} claim, so the known teams can't be told and "
                   "this rule fails closed", resource.urn)
            continue
        for rule in authorization.get("rules") or []:
            if not isinstance(rule, dict) or rule.get("action") == "Deny":
                continue
            jwt = field(rule, "principal", "jwt") or {}
            values = next((c.get("values") for c in jwt.get("claims") or [] if isinstance(c, dict) and c.get("name") == claim), None)
            if jwt.get("provider") not in set(names) or not isinstance(values, list) or not values:
                report(f"{where}: rule {rule.get('name')} allows requests without requiring the {claim} claim from a JWT "
                       f"provider of the policy; an Allow rule admits only the site's teams ({', '.join(sorted(teams))})",
                       resource.urn)
            elif unknown := sorted(set(map(str, values)) - teams):
                report(f"{where}: rule {rule.get('name')} admits {claim} {', '.join(unknown)}, which is not a team of the site "
                       f"(teams: {', '.join(sorted(teams))})", resource.urn)


# -------------------------------------------------------------------------------------------------
# Each team's rate limit, counted once across the gateway's replicas.

def _claims_to_headers(obj: dict[str, Any]) -> Any:
    """The claimToHeaders of each JWT provider of a SecurityPolicy (UNKNOWN where unknown)."""
    providers = jwt_providers(obj)
    return providers if providers is UNKNOWN else [p.get("claimToHeaders") for p in providers]


def _team_headers(route: Route, claim: str) -> set[str]:
    """The request headers the route's JWT providers fill from the team claim (the header a rate limit can match)."""
    return {
        str(mapping.get("header")).lower()
        for _, obj in route.security
        for mappings in _claims_to_headers(obj)
        for mapping in mappings or []
        if isinstance(mapping, dict) and mapping.get("claim") == claim and mapping.get("header")
    }


def _limits_team(rule: Any, headers: set[str], team: str) -> bool:
    """Whether an enforced rate limit rule gives `team` a bucket of its own: its only conditions are on a team header,
    either an exact match of the team, or `Distinct` (a bucket per team) with the team not excluded by an inverted
    match; and it is not in shadow mode (counted, not enforced), and no cost makes a request count for less than one."""
    if not isinstance(rule, dict) or rule.get("shadowMode") or rule.get("cost") or field(rule, "limit", "requests") is None:
        return False
    selectors = rule.get("clientSelectors") or []
    if not selectors or not all(isinstance(s, dict) and set(s) == {"headers"} for s in selectors):
        return False
    matches = [m for s in selectors for m in s.get("headers") or []]
    if not matches or not all(isinstance(m, dict) and str(m.get("name")).lower() in headers for m in matches):
        return False
    exact = [m for m in matches if m.get("type", "Exact") == "Exact" and not m.get("invert")]
    distinct = [m for m in matches if m.get("type") == "Distinct"]
    excluded = [m for m in matches if m.get("type", "Exact") == "Exact" and m.get("invert")]
    if len(exact) + len(distinct) + len(excluded) != len(matches):
        return False  # a regular expression: not one team's bucket
    if exact:
        return all(m.get("value") == team for m in exact) and team not in {m.get("value") for m in excluded}
    return bool(distinct) and team not in {m.get("value") for m in excluded}


def _team_rules(args: StackValidationArgs, report: ReportViolation, needs_header: bool) -> Any:
    """Per GPU route with a JWT policy and a rate limit: (route, team, scopes whose rules limit that team alone), for each
    known team; fails closed where the teams, the header or the rate limits can't be known. `needs_header`: report a
    route whose JWT providers fill no team header (no rate limit can then tell teams apart)."""
    claim = args.get_config().get("teamClaim", TEAM_CLAIM)
    teams = site_teams(args.resources, claim, report)
    for route in gpu_routes(args.resources, report):
        if not route.security or not route.traffic:
            continue  # fab-routes-authenticated
        deciding = {"claimToHeaders": [_claims_to_headers(obj) for _, obj in route.security],
                    "rateLimit": [field(obj, "spec", "rateLimit") for _, obj in route.traffic]}
        if problem := undecided(route.where, deciding):
            report(problem, route.resource.urn)
            continue
        if not teams:
            report(f"{route.where}: no Keycloak client of the site carries the {claim} claim, so the known teams can't be told "
                   "and this rule fails closed", route.resource.urn)
            continue
        headers = _team_headers(route, claim)
        if not headers:
            if needs_header:
                report(f"{route.where}: no JWT provider covering it copies the {claim} claim into a header, so no rate limit "
                       "can single out a team", route.resource.urn)
            continue
        for team in sorted(teams):
            scopes = {scope for _, obj in route.traffic for scope in ("global", "local")
                      for rule in field(obj, "spec", "rateLimit", scope, "rules") or [] if _limits_team(rule, headers, team)}
            yield route, team, sorted(headers), sorted(scopes)


@stack_rule("fab-gateway-team-rate-limits",
            "Every GPU-cluster HTTPRoute has, for each team of the site, an enforced rate limit rule that counts that team's "
            "requests in a bucket of their own.",
            settings=TEAM_CLAIM_SETTING,
            place=120,
            docs="every GPU-cluster HTTPRoute has, per team of the site, an enforced rule that gives that team a bucket of its "
                 "own (conditions only on the team header set from the token's team claim: the team's name, or `Distinct` "
                 "without excluding it)")
def gateway_team_rate_limits(args: StackValidationArgs, report: ReportViolation) -> None:
    """A team's rule matches only on the header its JWT provider fills from the team claim: exactly the team's name, or
    Distinct (a bucket per value) without excluding the team. Unknown values: a route whose JWT providers or rate limits
    are unknown fails closed; so do unknown teams."""
    for route, team, headers, scopes in _team_rules(args, report, needs_header=True):
        if not scopes:
            report(f"{route.where}: team {team} has no enforced rate limit of its own; add a rule whose only selector is "
                   f"header {headers[0]} = {team}, or a Distinct rule on {headers[0]} that does not exclude it", route.resource.urn)


@stack_rule("fab-gateway-rate-limits-global",
            "Every team rate limit of a GPU-cluster HTTPRoute is global: counted once across all gateway replicas.",
            settings=TEAM_CLAIM_SETTING,
            place=130,
            docs="every such team limit is in `rateLimit.global`, counted once across all gateway replicas (a local rule beside "
                 "it is a backstop)")
def gateway_rate_limits_global(args: StackValidationArgs, report: ReportViolation) -> None:
    """A local rule is counted by each Envoy replica on its own, so with N replicas a team gets N times its rate. A local
    rule next to the global one (a backstop while the rate limit service does not answer) is fine. Unknown values: as
    fab-gateway-team-rate-limits."""
    for route, team, _, scopes in _team_rules(args, report, needs_header=False):
        if scopes == ["local"]:
            report(f"{route.where}: team {team}'s rate limit is local only: each gateway replica counts it on its own, so the "
                   "team gets its rate once per replica; put the rule in rateLimit.global", route.resource.urn)


def _service_host(url: str) -> tuple[str, str, int] | None:
    """(service, namespace, port) of a `<service>.<namespace>.svc[.<cluster domain>]:<port>` address, else None."""
    parts = urlsplit(f"//{url}")
    try:
        port = parts.port
    except ValueError:
        return None
    labels = (parts.hostname or "").split(".")
    if port is None or len(labels) < 3 or labels[2] != "svc":
        return None
    return labels[0], labels[1], port


@stack_rule("fab-gateway-rate-limit-backend",
            "Every cluster with global rate limits runs Envoy Gateway with a rate limit backend: a Redis URL naming a "
            "Service and port of that cluster in the plan.",
            place=140,
            docs="a cluster with global rate limits runs Envoy Gateway with a rate limit backend whose Redis URL is a Service "
                 "and port of that cluster in the plan")
def gateway_rate_limit_backend(args: StackValidationArgs, report: ReportViolation) -> None:
    """Envoy Gateway refuses global rate limits when its configuration (chart values `config.envoyGateway.rateLimit`) has
    no backend, and its rate limit service admits everything when the backend is not there. Unknown values: a
    BackendTrafficPolicy whose global rules, or a release whose rate limit settings, are unknown fails closed."""
    limited: dict[str, tuple[Any, str]] = {}
    services: dict[tuple[str, str, str], Any] = {}
    for resource, obj in objects(args.resources):
        cluster = provider_name(resource)
        if obj["kind"] == "Service":
            services[(cluster, namespace_of(obj), name_of(obj))] = field(obj, "spec", "ports")
        if obj["kind"] != "BackendTrafficPolicy":
            continue
        where = f"BackendTrafficPolicy {namespace_of(obj)}/{name_of(obj)} on {cluster}"
        rules = field(obj, "spec", "rateLimit", "global", "rules")
        if problem := undecided(where, rules, ".spec.rateLimit.global.rules"):
            report(problem, resource.urn)
        elif rules:
            limited.setdefault(cluster, (resource, where))
    releases = {provider_name(r): r for r in args.resources
                if r.resource_type == HELM_RELEASE and chart_name(plain(r.props).get("chart")) == ENVOY_GATEWAY_CHART}
    for cluster, (policy, where) in sorted(limited.items()):
        release = releases.get(cluster)
        if release is None:
            report(f"{where} sets global rate limits, but {cluster} has no Envoy Gateway release to run their rate limit "
                   "service", policy.urn)
            continue
        props = plain(release.props)
        what = f"Envoy Gateway release {props.get('namespace')}/{props.get('name')} on {cluster}"
        backend = field(props, "values", "config", "envoyGateway", "rateLimit", "backend")
        if problem := undecided(what, backend, ".values.config.envoyGateway.rateLimit.backend"):
            report(problem, release.urn)
            continue
        url = field(backend, "redis", "url")
        if field(backend, "type") != "Redis" or not isinstance(url, str) or not url:
            report(f"{what} configures no rate limit backend (values config.envoyGateway.rateLimit.backend: a Redis url), so "
                   f"Envoy Gateway refuses the global rate limits of {where}", release.urn)
            continue
        host = _service_host(url)
        ports = services.get((cluster, host[1], host[0])) if host else None
        if host is not None and (problem := undecided(f"Service {host[1]}/{host[0]} on {cluster}", ports, ".spec.ports")):
            report(problem, release.urn)
        elif host is None or not any(isinstance(p, dict) and p.get("port") == host[2] for p in ports or []):
            report(f"{what}: the rate limit backend {url} is not a Service and port of {cluster} in the plan "
                   f"(<service>.<namespace>.svc:<port>), so the global rate limits of {where} are counted nowhere", release.urn)
