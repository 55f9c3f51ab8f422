"""`fabctl access`, gateway area: the HTTPRoutes of the rendered Gateways (the inference gateway, the compute
ingress) that admit the seat, by Envoy Gateway's SecurityPolicy semantics (docs/security.md).

A route's SecurityPolicy is the one targeting the HTTPRoute, else the one targeting its Gateway (or the listener
it attaches to). Without one the route is open (the backend's own sign-in decides). With JWT authentication a request
needs a token of the provider (with one of its `audiences`, when set) unless `optional`; `authorization.rules` are
tried in order, the first whose principal matches decides (clientCIDRs: one range holds the client; jwt: every claim
has one of its values, the provider's; headers; every type given must match), else `defaultAction` (Deny by default).

The seat's tokens are Keycloak's (components/identity.py): a team's gateway client (`inference-<team>`, its fixed
claims and audience mappers, rendered as Keycloak resources), and a person's sign-in, whose `groups` claim is the seat's
`keycloak_groups`; its client address is each of `source_cidrs` (outside) or a pod's (inside, matching no clientCIDRs).
Limits: basic auth, API keys and external authorization are not evaluated (a route behind one is not listed); a
provider is assumed to be the site's Keycloak realm (its issuer is not compared); the Gateway listener's own
restrictions (TLS client certificates) are not read; whether the seat reaches the Gateway at all is the network area's.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from components.config import names
from fabctl.access.model import Access, Principal
from fabctl.render import Plan

AREA = "gateway"
CLIENT_TYPE = "keycloak:openid/client:Client"
CLAIM_MAPPER_TYPE = "keycloak:openid/hardcodedClaimProtocolMapper:HardcodedClaimProtocolMapper"
AUDIENCE_MAPPER_TYPE = "keycloak:openid/audienceProtocolMapper:AudienceProtocolMapper"
GROUPS_CLAIM = "groups"
INSIDE = "inside"


@dataclass(frozen=True)
class Token:
    """A token the seat can get: where from, its claims, its audiences."""

    source: str
    claims: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    audiences: frozenset[str] = frozenset()


def _client_tokens(plan: Plan) -> dict[str, Token]:
    """Keycloak client id -> the token its client credentials give (its fixed claims and audiences)."""
    clients = {r["urn"]: r for r in plan.of_type(CLIENT_TYPE)}
    by_mock_id = {f"{r['name']}-id": urn for urn, r in clients.items()}
    claims: dict[str, dict[str, tuple[str, ...]]] = {}
    audiences: dict[str, set[str]] = {}
    for mapper_type in (CLAIM_MAPPER_TYPE, AUDIENCE_MAPPER_TYPE):
        for mapper in plan.of_type(mapper_type):
            urns = (mapper.get("property_dependencies") or {}).get("clientId") or []
            urn = next((u for u in urns if u in clients), by_mock_id.get(str(mapper["inputs"].get("clientId"))))
            if urn is None:
                continue
            if mapper_type == CLAIM_MAPPER_TYPE and mapper["inputs"].get("addToAccessToken", True):
                claims.setdefault(urn, {})[mapper["inputs"]["claimName"]] = (str(mapper["inputs"]["claimValue"]),)
            elif mapper_type == AUDIENCE_MAPPER_TYPE and mapper["inputs"].get("includedCustomAudience"):
                audiences.setdefault(urn, set()).add(mapper["inputs"]["includedCustomAudience"])
    return {r["inputs"]["clientId"]: Token(f"Keycloak client {r['inputs']['clientId']}", claims.get(urn, {}),
                                           frozenset(audiences.get(urn, set())))
            for urn, r in clients.items()}


def tokens(plan: Plan, principal: Principal) -> list[Token]:
    """The tokens the seat can present."""
    found = []
    if principal.kind == "team":
        client = _client_tokens(plan).get(names.TEAM_GATEWAY_CLIENT(principal.name))
        if client is not None:
            found.append(client)
    if principal.keycloak_groups:
        found.append(Token("Keycloak sign-in", {GROUPS_CLAIM: tuple(principal.keycloak_groups)}))
    return found


def _contains(outer: str, inner: str) -> bool:
    a, b = ipaddress.ip_network(outer, strict=False), ipaddress.ip_network(inner, strict=False)
    return a.version == b.version and b.subnet_of(a)


def _claims_match(wanted: list[dict[str, Any]], token: Token) -> bool:
    for claim in wanted:
        held = token.claims.get(claim["name"], ())
        if not set(held) & {str(v) for v in claim.get("values") or []}:
            return False
    return True


def _rule_matches(principal_spec: dict[str, Any], token: Token | None, client: str) -> bool:
    """Whether a rule's principal matches a request with `token` from `client` (a CIDR or INSIDE)."""
    if "clientCIDRs" in principal_spec:
        if client == INSIDE or not any(_contains(c, client) for c in principal_spec["clientCIDRs"]):
            return False
    if "jwt" in principal_spec:
        jwt = principal_spec["jwt"]
        if token is None or not _claims_match(jwt.get("claims") or [], token):
            return False
        if jwt.get("scopes") and not set(jwt["scopes"]) <= set(" ".join(token.claims.get("scope", ())).split()):
            return False
    if principal_spec.get("headers") or principal_spec.get("clientIPGeoLocations"):
        return False  # not evaluated: a request is not assumed to carry them
    return True


def _describe(rule: dict[str, Any]) -> str:
    spec = rule.get("principal") or {}
    parts = []
    if "clientCIDRs" in spec:
        parts.append(f"clientCIDRs {', '.join(spec['clientCIDRs'])}")
    if "jwt" in spec:
        claims = ", ".join(f"{c['name']} in {'|'.join(map(str, c.get('values') or []))}" for c in spec["jwt"].get("claims") or [])
        parts.append(f"jwt {spec['jwt'].get('provider', '')}: {claims}")
    return f"rule {rule.get('name', '?')} ({'; '.join(parts)})"


def admits(policy: dict[str, Any] | None, token_choices: list[Token], clients: list[str]) -> list[str]:
    """How a SecurityPolicy admits the seat (one line per way; empty: it does not)."""
    if policy is None:
        return ["no SecurityPolicy (the backend's own sign-in decides)"]
    spec = policy.get("spec") or {}
    name = f"SecurityPolicy {policy['metadata'].get('namespace', '')}/{policy['metadata']['name']}"
    if spec.get("basicAuth") or spec.get("apiKeyAuth") or spec.get("extAuth"):
        return []
    ways = []
    jwt = spec.get("jwt")
    candidates: list[Token | None] = []
    if jwt:
        providers = jwt.get("providers") or []
        for token in token_choices:
            if any(not p.get("audiences") or token.audiences & set(p["audiences"]) for p in providers):
                candidates.append(token)
        if jwt.get("optional"):
            candidates.append(None)
    else:
        candidates = [None]
    if spec.get("oidc"):
        candidates = [t for t in candidates if t is not None and t.source == "Keycloak sign-in"] or []
    authorization = spec.get("authorization")
    for token in candidates:
        for client in clients:
            where = "" if client == INSIDE else f" from {client}"
            holder = f" with a token of {token.source}" if token is not None else ""
            if not authorization:
                ways.append(f"{name}: authenticated{holder}{where}")
                continue
            decided = None
            for rule in authorization.get("rules") or []:
                if _rule_matches(rule.get("principal") or {}, token, client):
                    decided = (rule.get("action", "Allow"), _describe(rule))
                    break
            action, reason = decided or (authorization.get("defaultAction", "Deny"), "defaultAction")
            if action == "Allow":
                ways.append(f"{name}: {reason}{holder}{where}")
    return sorted(set(ways))


def _policy_for(policies: list[dict[str, Any]], route: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any] | None:
    """The SecurityPolicy of a route (the route's own, else its Gateway's or listener's)."""
    namespace = route["metadata"].get("namespace", "default")
    gateway_namespace = parent.get("namespace", namespace)
    own, gateway = None, None
    for policy in policies:
        policy_namespace = policy["metadata"].get("namespace", "default")
        refs = list(policy["spec"].get("targetRefs") or []) + ([policy["spec"]["targetRef"]] if policy["spec"].get("targetRef") else [])
        for ref in refs:
            if ref.get("kind") == "HTTPRoute" and ref.get("name") == route["metadata"]["name"] and policy_namespace == namespace:
                own = policy
            elif (ref.get("kind") == "Gateway" and ref.get("name") == parent.get("name") and policy_namespace == gateway_namespace
                  and ref.get("sectionName") in (None, parent.get("sectionName"))):
                gateway = policy
    return own or gateway


def _listener_host(gateways: dict[tuple[str, str, str], dict[str, Any]], cluster: str, parent: dict[str, Any], namespace: str) -> str | None:
    gateway = gateways.get((cluster, parent.get("namespace", namespace), parent.get("name", "")))
    for listener in (gateway or {}).get("spec", {}).get("listeners") or []:
        if parent.get("sectionName") in (None, listener.get("name")) and listener.get("hostname"):
            return listener["hostname"]
    return None


def paths(route: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, methods) of each rule's matches; a rule without matches is every path."""
    found = []
    for rule in route["spec"].get("rules") or []:
        for match in rule.get("matches") or [{}]:
            path = (match.get("path") or {}).get("value", "/")
            kind = (match.get("path") or {}).get("type", "PathPrefix")
            found.append((path if kind == "PathPrefix" else f"{path} (exact)" if kind == "Exact" else f"{path} ({kind})",
                          match.get("method", "*")))
    return found


def _xff(plan: Plan, cluster: str, parent: dict[str, Any], namespace: str) -> str:
    """The escalation when a ClientTrafficPolicy takes the client address from a header the client sends."""
    for obj in plan.objects("ClientTrafficPolicy", cluster):
        refs = obj["spec"].get("targetRefs") or []
        if any(r.get("kind") == "Gateway" and r.get("name") == parent.get("name") for r in refs):
            detection = obj["spec"].get("clientIPDetection") or {}
            if detection.get("xForwardedFor") or detection.get("customHeader"):
                return "the client address is taken from a request header (ClientTrafficPolicy clientIPDetection): clientCIDRs can be spoofed"
    return ""


def accesses(plan: Plan, principal: Principal) -> list[Access]:
    """One Access per route (host, path) of a rendered Gateway that admits the seat, and what admits it."""
    token_choices = tokens(plan, principal)
    clients = list(principal.source_cidrs) or [INSIDE]
    gateways = {(c, o["metadata"].get("namespace", "default"), o["metadata"]["name"]): o
                for c, o, _ in plan.manifests() if o["kind"] == "Gateway"}
    found = []
    for cluster, route, _ in plan.manifests():
        if route["kind"] != "HTTPRoute":
            continue
        namespace = route["metadata"].get("namespace", "default")
        policies = plan.objects("SecurityPolicy", cluster)
        for parent in route["spec"].get("parentRefs") or []:
            if (cluster, parent.get("namespace", namespace), parent.get("name", "")) not in gateways:
                continue
            ways = admits(_policy_for(policies, route, parent), token_choices, clients)
            if not ways:
                continue
            hosts = route["spec"].get("hostnames") or [_listener_host(gateways, cluster, parent, namespace) or "*"]
            via = f"HTTPRoute {namespace}/{route['metadata']['name']} on {cluster}: {'; '.join(ways)}"
            escalation = _xff(plan, cluster, parent, namespace) if any("clientCIDRs" in w for w in ways) else ""
            for host in hosts:
                for path, method in paths(route):
                    found.append(Access(AREA, host, path, method, via, escalation))
    return sorted(set(found))
