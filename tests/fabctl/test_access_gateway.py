"""`fabctl access`, gateway area (fabctl/access/gateway.py): the routes a seat can call through the rendered Gateways,
by Envoy Gateway's SecurityPolicy semantics."""

from __future__ import annotations

from access_fixtures import plan_of
from fabctl.access import gateway
from fabctl.access.model import Principal

CLUSTER = "site-t-gpu"
GATEWAY = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"namespace": "envoy-gateway-system", "name": "llm"},
           "spec": {"gatewayClassName": "fab-llm", "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "llm.t"}]}}
PARENT = [{"namespace": "envoy-gateway-system", "name": "llm", "sectionName": "https"}]
TEAM_TOKEN = gateway.Token("Keycloak client inference-a", {"team": ("a",), "llm_access": ("true",)}, frozenset({"llm-gateway"}))


def route(name, path="/v1", hostnames=None):
    spec = {"parentRefs": PARENT, "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}], "backendRefs": [{"name": name, "port": 8000}]}]}
    if hostnames:
        spec["hostnames"] = hostnames
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"namespace": "inference", "name": name}, "spec": spec}


def security_policy(target, authorization=None, jwt=True, kind="HTTPRoute", namespace="inference"):
    spec = {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": kind, "name": target}]}
    if jwt:
        spec["jwt"] = {"providers": [{"name": "keycloak", "audiences": ["llm-gateway"], "remoteJWKS": {"uri": "https://k/certs"}}]}
    if authorization:
        spec["authorization"] = authorization
    return {"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "SecurityPolicy", "metadata": {"namespace": namespace, "name": target}, "spec": spec}


def team_rule(*teams):
    return {"name": "teams", "action": "Allow", "principal": {"jwt": {"provider": "keycloak", "claims": [{"name": "team", "values": list(teams)}]}}}


def test_a_route_without_a_security_policy_is_open_to_every_seat():
    access = gateway.accesses(plan_of([(CLUSTER, GATEWAY), (CLUSTER, route("m"))]), Principal("user", "u"))
    assert [(a.target, a.scope, a.via) for a in access] == [
        ("llm.t", "/v1", "HTTPRoute inference/m on site-t-gpu: no SecurityPolicy (the backend's own sign-in decides)")]


def test_an_authorization_rule_admits_a_token_with_one_of_its_claim_values():
    policy = security_policy("m", {"defaultAction": "Deny", "rules": [team_rule("a", "b")]})
    assert gateway.admits(policy, [TEAM_TOKEN], [gateway.INSIDE]) == [
        "SecurityPolicy inference/m: rule teams (jwt keycloak: team in a|b) with a token of Keycloak client inference-a"]


def test_the_default_action_denies_a_token_no_rule_matches():
    policy = security_policy("m", {"rules": [team_rule("b")]})
    assert gateway.admits(policy, [TEAM_TOKEN], [gateway.INSIDE]) == []


def test_a_deny_rule_before_an_allow_rule_wins():
    deny = {**team_rule("a"), "name": "not-a", "action": "Deny"}
    policy = security_policy("m", {"defaultAction": "Allow", "rules": [deny, team_rule("a")]})
    assert gateway.admits(policy, [TEAM_TOKEN], [gateway.INSIDE]) == []


def test_a_token_without_the_providers_audience_is_refused():
    other = gateway.Token("Keycloak sign-in", {"team": ("a",)})
    policy = security_policy("m", {"rules": [team_rule("a")]})
    assert gateway.admits(policy, [other], [gateway.INSIDE]) == []


def test_client_cidrs_admit_a_range_they_hold_and_not_a_pod_inside():
    policy = security_policy("polaris", {"defaultAction": "Deny", "rules": [
        {"name": "vendor", "action": "Allow", "principal": {"clientCIDRs": ["192.0.2.16/28"]}}]}, jwt=False)
    assert gateway.admits(policy, [], ["192.0.2.16/29", "198.51.100.0/24", gateway.INSIDE]) == [
        "SecurityPolicy inference/polaris: rule vendor (clientCIDRs 192.0.2.16/28) from 192.0.2.16/29"]


def test_a_routes_own_policy_overrides_its_gateways():
    objects = [GATEWAY, route("m"), security_policy("llm", {"rules": [team_rule("b")]}, kind="Gateway", namespace="envoy-gateway-system"),
               security_policy("m", {"rules": [team_rule("a")]})]
    plan = plan_of([(CLUSTER, o) for o in objects], resources=_team_client("a"))
    assert [a.scope for a in gateway.accesses(plan, Principal("team", "a"))] == ["/v1"]


def test_a_gateways_policy_applies_to_a_route_without_its_own():
    objects = [GATEWAY, route("m"), security_policy("llm", {"rules": [team_rule("b")]}, kind="Gateway", namespace="envoy-gateway-system")]
    plan = plan_of([(CLUSTER, o) for o in objects], resources=_team_client("a"))
    assert gateway.accesses(plan, Principal("team", "a")) == []


def _team_client(team):
    """A team's Keycloak gateway client, its `team` claim and its audience, as components/identity.py registers them."""
    client = {"urn": f"urn:client:{team}", "type": gateway.CLIENT_TYPE, "name": f"identity-client-inference-{team}", "custom": True,
              "inputs": {"clientId": f"inference-{team}"}}
    claim = {"urn": f"urn:claim:{team}", "type": gateway.CLAIM_MAPPER_TYPE, "name": "c", "custom": True,
             "inputs": {"clientId": f"identity-client-inference-{team}-id", "claimName": "team", "claimValue": team, "addToAccessToken": True},
             "property_dependencies": {"clientId": [f"urn:client:{team}"]}}
    audience = {"urn": f"urn:aud:{team}", "type": gateway.AUDIENCE_MAPPER_TYPE, "name": "a", "custom": True,
                "inputs": {"clientId": f"identity-client-inference-{team}-id", "includedCustomAudience": "llm-gateway"},
                "property_dependencies": {"clientId": [f"urn:client:{team}"]}}
    return [client, claim, audience]


def _inference_routes(plan, principal):
    return {(a.target, a.scope) for a in gateway.accesses(plan, principal) if a.scope.startswith("/models/")}


def test_a_team_calls_every_model_route_of_the_inference_gateway_with_its_client(plan):
    teams = sorted(r["inputs"]["claimValue"] for r in plan.of_type(gateway.CLAIM_MAPPER_TYPE) if r["inputs"]["claimName"] == "team")
    assert teams
    models = {(h, p) for _, o, _ in plan.manifests() if o["kind"] == "HTTPRoute" for h in o["spec"].get("hostnames", [])
              for p, _ in gateway.paths(o) if p.startswith("/models/")}
    assert models
    assert _inference_routes(plan, Principal("team", teams[0])) == models


def test_a_person_without_a_team_client_calls_no_model_route(plan):
    assert _inference_routes(plan, Principal("user", "u", keycloak_groups=("platform-users",))) == set()


def test_a_vendor_calls_the_catalog_route_from_its_range_only(plan_a):
    routes = lambda cidr: {(a.target, a.scope) for a in gateway.accesses(plan_a, Principal("vendor", "v", source_cidrs=(cidr,)))
                           if a.target.startswith("catalog.")}
    assert routes("192.0.2.16/28") == {("catalog.site-a.fab.internal", "/api/catalog")}
    assert routes("198.51.100.0/24") == set()
