"""The inference gateway's rules, driven through the pack's Analyzer service with one edit of the full small site's render
(which passes every policy): whom the JWT policy trusts and admits, and each team's rate limit, counted globally."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from helpers import render_small
from policy_fixtures import check, k8s, kube
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE
from rules.network import gateway_local_traffic
from small_site import full_site

from fabctl._mockrun import UNKNOWN_VALUE
from fabctl.policy import analyze_in_process
from fabctl.render import Plan

ROUTE = "HTTPRoute inference/vllm-qwen3-8b on site-t-gpu"
POLICY = "SecurityPolicy inference/vllm-qwen3-8b on site-t-gpu"
RELEASE = "Envoy Gateway release envoy-gateway-system/envoy-gateway on site-t-gpu"
LIMITS = "BackendTrafficPolicy inference/vllm-qwen3-8b on site-t-gpu"
ISSUER = "https://keycloak.site-t.fab.internal/realms/fab"
KEYS = f"{ISSUER}/protocol/openid-connect/certs"


def by_name(resources: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (match,) = [r for r in resources if r["name"] == name]
    return match


def security(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_name(rs, "inference-jwt-qwen3-8b")["inputs"]["spec"]


def provider(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return security(rs)["jwt"]["providers"][0]


def rate_limit(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_name(rs, "inference-ratelimit-qwen3-8b")["inputs"]["spec"]["rateLimit"]


def team_rule(rules: list[dict[str, Any]], team: str) -> dict[str, Any]:
    (rule,) = [r for r in rules if r["clientSelectors"][0]["headers"] == [{"name": "x-fab-team", "type": "Exact", "value": team}]]
    return rule


def default_rules(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rule of every team at the default rate (Distinct on the team header), global and local: yield's in the full site."""
    limits = rate_limit(rs)
    return [limits[scope]["rules"][0] for scope in ("global", "local")]


NO_YIELD_LIMIT = (f"{ROUTE}: team yield has no enforced rate limit of its own; add a rule whose only selector is header "
                  "x-fab-team = yield, or a Distinct rule on x-fab-team that does not exclude it")


def found(plan: Plan, edit: Callable[[list[dict[str, Any]]], None]) -> list[tuple[str, str, str]]:
    """(rule, level, message) of every violation of the plan with `edit` applied to a copy of its resources."""
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    violations = analyze_in_process(dataclasses.replace(plan, resources=resources))
    return [(v.policy, v.level, v.message.splitlines()[-1]) for v in violations]


def mandatory(rule: str, *messages: str) -> list[tuple[str, str, str]]:
    return [(rule, "mandatory", m) for m in messages]


# fab-gateway-local-traffic ---------------------------------------------------------------------

def test_fails_when_the_gateway_service_uses_cluster_traffic_policy(full_plan):
    def edit(rs):
        by_name(rs, "inference-envoy-proxy")["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["externalTrafficPolicy"] = "Cluster"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-local-traffic",
        "EnvoyProxy llm: the gateway Service must use externalTrafficPolicy Local (got 'Cluster') so that flow rules see the "
        "caller's address",
    )


# fab-gateway-jwt-issuer ------------------------------------------------------------------------

def test_fails_when_the_jwt_provider_trusts_another_realm(full_plan):
    def edit(rs):
        provider(rs)["issuer"] = "https://keycloak.site-t.fab.internal/realms/master"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-issuer",
        f"{POLICY}: JWT provider keycloak trusts issuer https://keycloak.site-t.fab.internal/realms/master; only the site "
        f"realm's issuer {ISSUER} is allowed",
    )


def test_fails_when_the_jwt_provider_checks_no_issuer(full_plan):
    def edit(rs):
        del provider(rs)["issuer"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-issuer",
        f"{POLICY}: JWT provider keycloak checks no issuer, so it trusts any; only the site realm's issuer {ISSUER} is allowed",
    )


def test_fails_closed_when_the_site_realm_cannot_be_derived(full_plan):
    def edit(rs):
        del by_name(rs, "site-t-keycloak")["inputs"]["url"]

    why = "the site realm's issuer can't be derived from the plan (the SiteIdentity's Keycloak provider URL is not one known value (None)), so this rule fails closed"
    assert found(full_plan, edit) == [
        *mandatory("fab-gateway-jwt-issuer", f"{POLICY}: {why}"),
        *mandatory("fab-gateway-jwt-jwks", f"{POLICY}: {why}"),
    ]


def test_a_created_realm_is_the_site_realm():
    raw = full_site()
    raw["identity"] = {"realm": "fab-t", "create_realm": True}
    plan = render_small(raw)
    assert provider(plan.resources)["issuer"] == "https://keycloak.site-t.fab.internal/realms/fab-t"
    assert found(plan, lambda rs: None) == []


# fab-gateway-jwt-jwks --------------------------------------------------------------------------

def test_fails_when_the_jwt_provider_fetches_keys_elsewhere(full_plan):
    def edit(rs):
        provider(rs)["remoteJWKS"]["uri"] = "https://keys.example.com/jwks.json"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-jwks",
        f"{POLICY}: JWT provider keycloak fetches its keys from https://keys.example.com/jwks.json; only the site realm's "
        f"keys {KEYS} are allowed",
    )


def test_fails_when_the_jwt_provider_verifies_with_keys_written_into_the_policy(full_plan):
    def edit(rs):
        del provider(rs)["remoteJWKS"]
        provider(rs)["localJWKS"] = {"type": "Inline", "inline": '{"keys": []}'}

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-jwks",
        f"{POLICY}: JWT provider keycloak verifies with keys written into the policy (localJWKS); only the site realm's keys "
        f"{KEYS} are allowed",
    )


# fab-gateway-jwt-audience ----------------------------------------------------------------------

def test_fails_when_the_jwt_provider_checks_no_audience(full_plan):
    def edit(rs):
        del provider(rs)["audiences"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-audience",
        f"{POLICY}: JWT provider keycloak checks no audience (audiences None), so a token the realm issued to any client is "
        "accepted; list the gateway's audience",
    )


# fab-gateway-default-deny ----------------------------------------------------------------------

def test_fails_when_the_policy_allows_by_default(full_plan):
    def edit(rs):
        security(rs)["authorization"]["defaultAction"] = "Allow"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-default-deny",
        f"{POLICY}: authorization's defaultAction is 'Allow'; only 'Deny' is allowed, so that a client no rule admits is refused",
    )


def test_fails_when_the_policy_has_no_authorization(full_plan):
    def edit(rs):
        del security(rs)["authorization"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-default-deny",
        f"{POLICY} has no authorization, so every valid token of the realm is admitted; deny by default and allow the teams' "
        "tokens by their team claim",
    )


def test_fails_when_an_allow_rule_does_not_require_the_team_claim(full_plan):
    def edit(rs):
        claims = security(rs)["authorization"]["rules"][0]["principal"]["jwt"]["claims"]
        claims[:] = [c for c in claims if c["name"] != "team"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-default-deny",
        f"{POLICY}: rule team-clients allows requests without requiring the team claim from a JWT provider of the policy; "
        "an Allow rule admits only the site's teams (fdc, yield)",
    )


def test_fails_when_an_allow_rule_admits_an_unknown_team(full_plan):
    def edit(rs):
        security(rs)["authorization"]["rules"][0]["principal"]["jwt"]["claims"][1]["values"].append("vendor")

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-default-deny",
        f"{POLICY}: rule team-clients admits team vendor, which is not a team of the site (teams: fdc, yield)",
    )


def test_fails_closed_when_no_client_carries_the_team_claim(full_plan):
    def edit(rs):
        rs[:] = [r for r in rs if not (r["type"].endswith(":HardcodedClaimProtocolMapper") and r["inputs"]["claimName"] == "team")]

    unknown = "no Keycloak client of the site carries the team claim, so the known teams can't be told"
    assert found(full_plan, edit) == [
        *mandatory("fab-gateway-default-deny", f"{POLICY}: {unknown} and this rule fails closed"),
        *mandatory("fab-gateway-rate-limits-global", f"{ROUTE}: {unknown} and this rule fails closed"),
        *mandatory("fab-gateway-team-rate-limits", f"{ROUTE}: {unknown} and this rule fails closed"),
    ]


# fab-gateway-team-rate-limits ------------------------------------------------------------------

def test_fails_when_a_team_has_no_rate_limit_of_its_own(full_plan):
    def edit(rs):
        for rule in default_rules(rs):
            rule["clientSelectors"][0]["headers"].append({"name": "x-fab-team", "type": "Exact", "value": "yield", "invert": True})

    assert found(full_plan, edit) == mandatory("fab-gateway-team-rate-limits", NO_YIELD_LIMIT)


def test_fails_when_a_team_limit_is_only_counted_not_enforced(full_plan):
    def edit(rs):
        for rule in default_rules(rs):
            rule["shadowMode"] = True

    assert found(full_plan, edit) == mandatory("fab-gateway-team-rate-limits", NO_YIELD_LIMIT)


def test_fails_when_a_team_limit_counts_only_some_of_its_requests(full_plan):
    def edit(rs):
        for rule in default_rules(rs):
            rule["clientSelectors"][0]["methods"] = [{"value": "POST"}]

    assert found(full_plan, edit) == mandatory("fab-gateway-team-rate-limits", NO_YIELD_LIMIT)


def test_fails_when_no_header_carries_the_team_claim(full_plan):
    def edit(rs):
        del provider(rs)["claimToHeaders"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-team-rate-limits",
        f"{ROUTE}: no JWT provider covering it copies the team claim into a header, so no rate limit can single out a team",
    )


# fab-gateway-rate-limits-global ----------------------------------------------------------------

def test_fails_when_a_team_limit_is_counted_per_replica(full_plan):
    def edit(rs):
        rules = rate_limit(rs)["global"]["rules"]
        rules.remove(team_rule(rules, "fdc"))  # fdc keeps its own rule in the local backstop

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-rate-limits-global",
        f"{ROUTE}: team fdc's rate limit is local only: each gateway replica counts it on its own, so the team gets its rate "
        "once per replica; put the rule in rateLimit.global",
    )


# fab-gateway-rate-limit-backend ----------------------------------------------------------------

def test_fails_when_envoy_gateway_has_no_rate_limit_backend(full_plan):
    def edit(rs):
        del by_name(rs, "inference-envoy-gateway")["inputs"]["values"]["config"]

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-rate-limit-backend",
        f"{RELEASE} configures no rate limit backend (values config.envoyGateway.rateLimit.backend: a Redis url), so Envoy "
        f"Gateway refuses the global rate limits of {LIMITS}",
    )


def test_fails_when_the_rate_limit_backend_is_no_service_of_the_plan(full_plan):
    def edit(rs):
        values = by_name(rs, "inference-envoy-gateway")["inputs"]["values"]
        values["config"]["envoyGateway"]["rateLimit"]["backend"]["redis"]["url"] = "redis.redis-system.svc:6379"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-rate-limit-backend",
        f"{RELEASE}: the rate limit backend redis.redis-system.svc:6379 is not a Service and port of site-t-gpu in the plan "
        f"(<service>.<namespace>.svc:<port>), so the global rate limits of {LIMITS} are counted nowhere",
    )


def test_fails_when_the_rate_limit_backend_port_is_not_the_services(full_plan):
    def edit(rs):
        values = by_name(rs, "inference-envoy-gateway")["inputs"]["values"]
        values["config"]["envoyGateway"]["rateLimit"]["backend"]["redis"]["url"] = "ratelimit-valkey.envoy-gateway-system.svc:6380"

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-rate-limit-backend",
        f"{RELEASE}: the rate limit backend ratelimit-valkey.envoy-gateway-system.svc:6380 is not a Service and port of "
        f"site-t-gpu in the plan (<service>.<namespace>.svc:<port>), so the global rate limits of {LIMITS} are counted nowhere",
    )


# Values unknown during a preview -----------------------------------------------------------------

def test_the_local_traffic_rule_fails_closed_on_an_unknown_service():
    proxy = k8s("EnvoyProxy", "llm", "envoy-gateway-system", api="gateway.envoyproxy.io/v1alpha1",
                spec={"provider": {"type": "Kubernetes", "kubernetes": {"envoyService": UNKNOWN_OBJECT_VALUE}}})
    assert check(gateway_local_traffic, kube(proxy, "site-a-gpu")) == [(
        "EnvoyProxy llm: .spec.provider.kubernetes.envoyService can't be known during preview, and this rule decides on it, so "
        "it fails closed; compute the value in the program instead of from another resource's output"
    )]


def test_the_issuer_rule_fails_closed_on_an_unknown_issuer(full_plan):
    def edit(rs):
        provider(rs)["issuer"] = UNKNOWN_VALUE

    assert found(full_plan, edit) == mandatory(
        "fab-gateway-jwt-issuer",
        f"{POLICY}: .spec.jwt.providers[0].issuer can't be known during preview, and this rule decides on it, so it fails "
        "closed; compute the value in the program instead of from another resource's output",
    )
