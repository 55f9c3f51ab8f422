"""Routes Argo CD applies from the serving repository (`inference.delivery: argocd`) are not in the plan; the pack holds
the policies that name them to the same rules as those of a route in the plan."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from helpers import render_small
from small_site import SERVING_REPO_TOKEN, small_site, with_argocd

from fabctl.policy import analyze_in_process


@pytest.fixture(scope="module")
def argocd_plan():
    return render_small(with_argocd(small_site()), secrets=SERVING_REPO_TOKEN)


def without(plan, type_suffix: str, name: str):
    resources = [r for r in copy.deepcopy(plan.resources) if not (r["type"].endswith(type_suffix) and r["name"] == name)]
    assert len(resources) == len(plan.resources) - 1
    return dataclasses.replace(plan, resources=resources)


def messages(plan) -> list[tuple[str, str]]:
    """(rule, message without the rule's description) of every violation."""
    return [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(plan)]


def test_a_site_served_from_git_passes_every_policy(argocd_plan):
    assert [(v.policy, v.message) for v in analyze_in_process(argocd_plan)] == []


def test_fails_when_a_route_from_git_loses_its_jwt_policy(argocd_plan):
    violations = messages(without(argocd_plan, ":SecurityPolicy", "inference-jwt-qwen3-8b"))
    assert violations == [
        ("fab-routes-authenticated", "HTTPRoute inference/vllm-qwen3-8b on site-t-gpu has no JWT SecurityPolicy"),
    ]


def test_fails_when_a_route_from_git_loses_its_rate_limit(argocd_plan):
    violations = messages(without(argocd_plan, ":BackendTrafficPolicy", "inference-ratelimit-qwen3-8b"))
    assert violations == [
        ("fab-routes-authenticated", "HTTPRoute inference/vllm-qwen3-8b on site-t-gpu has no rate limit (BackendTrafficPolicy)"),
    ]


def test_fails_when_the_gateway_of_routes_from_git_has_no_jwt_policy(argocd_plan):
    violations = messages(without(argocd_plan, ":SecurityPolicy", "inference-gateway-jwt"))
    assert violations == [
        ("fab-routes-authenticated", "Gateway envoy-gateway-system/llm on site-t-gpu has no JWT SecurityPolicy (its routes come "
                                     "from Git: inference.delivery is argocd)"),
    ]


def test_fails_when_the_gateway_of_routes_from_git_has_no_rate_limit(argocd_plan):
    violations = messages(without(argocd_plan, ":BackendTrafficPolicy", "inference-gateway-ratelimit"))
    assert violations == [
        ("fab-routes-authenticated", "Gateway envoy-gateway-system/llm on site-t-gpu has no rate limit (BackendTrafficPolicy) (its "
                                     "routes come from Git: inference.delivery is argocd)"),
    ]
