"""Model-aware routing (`inference.routing: inference-extension`): per model an InferencePool and its endpoint picker
behind the same Envoy Gateway route, which keeps its URL, its JWT policy and its rate limits (components/routing.py)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import config_errors, render_small
from schemas import CrdSchemas, chart_crds, schema_errors
from small_site import add_model, small_site

from components import versions
from components.routing import DESTINATION_HEADER, EPP_GRPC_PORT
from fabctl.check.runtime import CONFIG_FILE

GPU = "site-t-gpu"
MODEL = "qwen3-8b"
ROUTE = f"vllm-{MODEL}"
EPP = f"epp-{MODEL}"
EPP_KINDS = ["ConfigMap", "Deployment", "InferencePool", "Role", "RoleBinding", "Service", "ServiceAccount"]


def routed(**models: Any) -> dict[str, Any]:
    site = small_site()
    site["inference"]["routing"] = "inference-extension"
    for name in models:
        add_model(site, name)
    return site


@pytest.fixture(scope="module")
def plan():
    return render_small(routed())


@pytest.fixture(scope="module")
def crds(crd_dir, chart_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir, extra=list(chart_crds(chart_dir)))


def named(plan, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in plan.objects(kind, GPU) if o["metadata"]["name"] == name)


def picker_objects(plan) -> list[dict[str, Any]]:
    return [o for _, o, _ in plan.manifests() if o["metadata"]["name"] == EPP or o["kind"] in ("InferencePool", "EnvoyExtensionPolicy")]


def test_gateway_routing_renders_no_endpoint_picker(small_plan):
    assert picker_objects(small_plan) == []


def test_gateway_routing_adds_no_load_balancer_to_the_route(small_plan):
    assert "loadBalancer" not in named(small_plan, "BackendTrafficPolicy", ROUTE)["spec"]


def test_inference_extension_renders_a_pool_and_its_picker_per_model():
    plan = render_small(routed(**{"qwen3-8b-fr": {}}))
    pools = sorted(o["metadata"]["name"] for o in plan.objects("InferencePool", GPU))
    assert pools == ["vllm-qwen3-8b", "vllm-qwen3-8b-fr"]


def test_the_picker_has_its_objects(plan):
    kinds = sorted(o["kind"] for o in picker_objects(plan) if o["kind"] != "EnvoyExtensionPolicy")
    assert kinds == EPP_KINDS


def test_every_routing_object_validates_strictly(plan, crds):
    errors = {f"{o['kind']}/{o['metadata']['name']}": errs for o in picker_objects(plan) if (errs := schema_errors(o, crds))}
    assert errors == {}


def test_the_pool_selects_the_models_stable_replicas(plan):
    pool = named(plan, "InferencePool", ROUTE)["spec"]
    assert pool["selector"]["matchLabels"] == named(plan, "Service", ROUTE)["spec"]["selector"]


def test_the_pool_names_its_picker(plan):
    assert named(plan, "InferencePool", ROUTE)["spec"]["endpointPickerRef"]["name"] == EPP


def test_the_picker_reads_its_pool(plan):
    args = named(plan, "Deployment", EPP)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--pool-name") + 1] == ROUTE


def test_the_picker_serves_plain_grpc_to_envoy(plan):
    assert "--secure-serving=false" in named(plan, "Deployment", EPP)["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_picker_runs_on_system_nodes(plan):
    pod = named(plan, "Deployment", EPP)["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod


def test_the_picker_may_read_pods_and_pools_only(plan):
    rules = named(plan, "Role", EPP)["rules"]
    assert {(r["apiGroups"][0], res, tuple(r["verbs"])) for r in rules for res in r["resources"]} == {
        ("", "pods", ("get", "watch", "list")),
        ("inference.networking.k8s.io", "inferencepools", ("get", "watch", "list")),
        ("inference.networking.x-k8s.io", "inferenceobjectives", ("get", "watch", "list")),
        ("inference.networking.x-k8s.io", "inferencemodelrewrites", ("get", "watch", "list")),
    }


def test_the_extension_policy_sends_the_route_to_the_picker(plan):
    spec = named(plan, "EnvoyExtensionPolicy", ROUTE)["spec"]
    assert (spec["targetRefs"], spec["extProc"][0]["backendRefs"]) == (
        [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": ROUTE}],
        [{"group": "", "kind": "Service", "name": EPP, "port": EPP_GRPC_PORT}],
    )


def test_the_route_goes_to_the_pod_the_picker_names(plan):
    balancer = named(plan, "BackendTrafficPolicy", ROUTE)["spec"]["loadBalancer"]
    assert balancer["endpointOverride"] == {"extractFrom": [{"header": DESTINATION_HEADER}]}


def test_the_route_keeps_one_traffic_policy_with_its_rate_limits(plan, small_plan):
    policies = [o for o in plan.objects("BackendTrafficPolicy", GPU) if o["spec"]["targetRefs"][0]["name"] == ROUTE]
    assert [p["spec"]["rateLimit"] for p in policies] == [named(small_plan, "BackendTrafficPolicy", ROUTE)["spec"]["rateLimit"]]


def test_the_route_keeps_its_jwt_policy(plan, small_plan):
    assert named(plan, "SecurityPolicy", ROUTE)["spec"] == named(small_plan, "SecurityPolicy", ROUTE)["spec"]


def test_the_route_keeps_its_url(plan, small_plan):
    assert named(plan, "HTTPRoute", ROUTE)["spec"] == named(small_plan, "HTTPRoute", ROUTE)["spec"]


def test_the_gateway_strips_a_client_sent_destination(plan):
    assert DESTINATION_HEADER in named(plan, "ClientTrafficPolicy", "llm")["spec"]["headers"]["earlyRequestHeaders"]["remove"]


def test_a_model_with_a_canary_keeps_gateway_routing():
    site = routed()
    site["inference"]["models"][MODEL].update(revision="r1", canary={"revision": "r2", "weight_percent": 10})
    plan = render_small(site)
    assert (picker_objects(plan), "loadBalancer" in named(plan, "BackendTrafficPolicy", ROUTE)["spec"]) == ([], False)


def test_every_pool_and_picker_waits_for_the_crds(plan):
    crds = next(r for r in plan.resources if r["type"] == CONFIG_FILE)
    pickers = [r for r in plan.resources if "-epp-" in r["name"]]
    assert (crds["inputs"]["file"], len(pickers), [r["name"] for r in pickers if crds["urn"] not in plan.waits_for(r)]) == (
        versions.INFERENCE_EXTENSION_CRDS, len(EPP_KINDS), [],
    )


def test_fails_when_inference_extension_comes_before_phase_5():
    site = routed()
    site["phase"] = 4
    assert config_errors(site) == [
        ("fab-platform:site.inference.routing: 'inference-extension' routes each model's requests through its endpoint "
        "picker: model-aware routing (an InferencePool and its endpoint picker per model) comes in phase 05 (scale-out) "
        "and the site is at phase 4; do without it until phase 04 is done and phase is 5 (docs/roadmap.md), or list "
        "inference-extension in early_features")
    ]
