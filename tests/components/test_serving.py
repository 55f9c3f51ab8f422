"""A model's serving objects (components/serving.py): one builder for both deliveries, revisions, canaries, and
`inference.delivery: argocd`, under which the stack registers none of them and `fabctl serving render` writes them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import config_errors, render_small
from schemas import CrdSchemas, schema_errors
from small_site import SERVING_REPO_TOKEN, add_model, small_site, with_argocd

from components import serving
from fabctl.diff import diff
from fabctl.render import Plan
from fabctl.serving import delivered_by_pulumi, handover_commands, serving_tree
from fabctl.stackfile import SITE_KEY

MODEL = "qwen3-8b"
"""The small site's one model."""


@pytest.fixture(scope="module")
def crds(crd_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir)


def argocd(site: dict[str, Any]) -> dict[str, Any]:
    """The site with its models delivered by Argo CD from the serving repository."""
    return with_argocd(copy.deepcopy(site))


def render(site: dict[str, Any]) -> Plan:
    """The render of a site, with the serving repository's token where Argo CD reads it."""
    return render_small(site, secrets=SERVING_REPO_TOKEN if site["compute"].get("argocd", {}).get("enabled") else None)


def with_canary(site: dict[str, Any], revision: str = "r1", canary: str = "r2", weight: int = 10) -> dict[str, Any]:
    site = copy.deepcopy(site)
    site["inference"]["models"][MODEL].update(revision=revision, canary={"revision": canary, "weight_percent": weight})
    return site


def tree(site: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`fabctl serving render`'s files of a site: path -> object."""
    config = delivered_by_pulumi({SITE_KEY: site})
    return {path: obj for path, (obj, _) in serving_tree(render(config[SITE_KEY]), config).items()}


def serving_kinds(plan) -> list[tuple[str, str]]:
    return sorted((obj["kind"], obj["metadata"]["name"]) for cluster, obj, _ in plan.manifests()
                  if cluster == "site-t-gpu" and obj["metadata"].get("namespace") == "inference"
                  and obj["kind"] in ("Deployment", "Service", "PodDisruptionBudget", "HTTPRoute"))


def test_delivery_pulumi_registers_each_models_serving_objects():
    assert serving_kinds(render(small_site())) == [
        ("Deployment", "vllm-qwen3-8b"), ("HTTPRoute", "vllm-qwen3-8b"), ("PodDisruptionBudget", "vllm-qwen3-8b"),
        ("Service", "vllm-qwen3-8b"),
    ]


def test_delivery_argocd_registers_no_serving_object():
    assert serving_kinds(render(argocd(small_site()))) == []


def test_delivery_argocd_keeps_the_routes_authentication_and_rate_limits():
    plan = render(argocd(small_site()))
    policies = sorted((obj["kind"], obj["metadata"]["name"], obj["spec"]["targetRefs"][0]["name"])
                      for obj in (*plan.objects("SecurityPolicy", "site-t-gpu"), *plan.objects("BackendTrafficPolicy", "site-t-gpu"))
                      if obj["metadata"]["namespace"] == "inference")
    assert policies == [("BackendTrafficPolicy", "vllm-qwen3-8b", "vllm-qwen3-8b"), ("SecurityPolicy", "vllm-qwen3-8b", "vllm-qwen3-8b")]


def test_the_serving_repository_holds_what_delivery_pulumi_registers():
    site = small_site()
    plan = render(site)
    registered = {(obj["kind"], obj["metadata"]["name"]): obj for cluster, obj, _ in plan.manifests() if cluster == "site-t-gpu"}
    files = tree(argocd(site))
    assert sorted(files) == [f"gpu/{MODEL}/deployment.yaml", f"gpu/{MODEL}/httproute.yaml", f"gpu/{MODEL}/pdb.yaml",
                             f"gpu/{MODEL}/service.yaml"]
    assert all(obj == registered[obj["kind"], obj["metadata"]["name"]] for obj in files.values())


def test_the_serving_repository_keeps_the_sizing_of_the_active_profile():
    site = small_site()
    site["profiles"] = {"night": {"description": "fewer replicas", "replicas": {MODEL: 1}}}
    site["active_profile"] = "night"
    deployment = tree(argocd(site))[f"gpu/{MODEL}/deployment.yaml"]
    assert deployment["spec"]["replicas"] == 1


def test_every_file_of_the_serving_repository_validates_strictly(crds):
    files = tree(argocd(with_canary(small_site())))
    assert len(files) == 6
    assert {path: errors for path, obj in files.items() if (errors := schema_errors(obj, crds))} == {}


def test_a_revision_is_part_of_the_weights_source_and_the_cache_path():
    site = small_site()
    site["inference"]["models"][MODEL]["revision"] = "2026-11-30"
    deployment = tree(site)[f"gpu/{MODEL}/deployment.yaml"]
    pod = deployment["spec"]["template"]["spec"]
    sync = next(c for c in pod["initContainers"] if c["name"] == "weights-sync")
    assert sync["args"][-2:] == ["models/site-t-models/qwen/qwen3-8b/2026-11-30", "/models/qwen3-8b/2026-11-30"]
    assert pod["containers"][0]["args"][:2] == ["--model", "/models/qwen3-8b/2026-11-30"]
    assert deployment["spec"]["template"]["metadata"]["labels"]["fab.internal/model-revision"] == "2026-11-30"


def test_a_model_without_revision_reads_its_source_as_before():
    pod = tree(small_site())[f"gpu/{MODEL}/deployment.yaml"]["spec"]["template"]["spec"]
    sync = next(c for c in pod["initContainers"] if c["name"] == "weights-sync")
    assert sync["args"][-2:] == ["models/site-t-models/qwen/qwen3-8b", "/models/qwen3-8b"]


def test_a_canary_gets_the_share_of_the_route_it_is_configured_with():
    route = tree(with_canary(small_site(), weight=20))[f"gpu/{MODEL}/httproute.yaml"]
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"name": "vllm-qwen3-8b", "port": 8000, "weight": 80}, {"name": "vllm-qwen3-8b-canary", "port": 8000, "weight": 20},
    ]


def test_a_canary_serves_its_revision_from_its_own_cache_path():
    canary = tree(with_canary(small_site()))[f"gpu/{MODEL}/canary.yaml"]
    pod = canary["spec"]["template"]["spec"]
    assert (canary["metadata"]["name"], canary["spec"]["replicas"]) == ("vllm-qwen3-8b-canary", 1)
    assert pod["containers"][0]["args"][:2] == ["--model", "/models/qwen3-8b/r2"]


def test_the_stable_service_and_budget_never_select_the_canarys_pods():
    files = tree(with_canary(small_site()))
    canary_pods = files[f"gpu/{MODEL}/canary.yaml"]["spec"]["template"]["metadata"]["labels"]
    stable = [files[f"gpu/{MODEL}/service.yaml"]["spec"]["selector"], files[f"gpu/{MODEL}/pdb.yaml"]["spec"]["selector"]["matchLabels"]]
    assert canary_pods == {"app.kubernetes.io/name": "vllm", "fab.internal/canary-of": MODEL, "fab.internal/model-revision": "r2"}
    assert [selector.items() <= canary_pods.items() for selector in stable] == [False, False]


def test_the_canary_service_selects_only_the_canarys_pods():
    files = tree(with_canary(small_site()))
    assert files[f"gpu/{MODEL}/canary-service.yaml"]["spec"]["selector"] == {
        "app.kubernetes.io/name": "vllm", "fab.internal/canary-of": MODEL,
    }


def test_fails_when_a_canary_has_no_room_in_the_inference_pool():
    site = with_canary(small_site())
    site["inference"]["models"][MODEL]["canary"]["replicas"] = 64
    (line,) = config_errors(site)
    assert line.startswith("fab-platform:site.inference.models: the models need ")
    assert "qwen3-8b canary 64 x TP1 = 64" in line


def test_fails_when_a_canary_serves_the_current_revision():
    assert config_errors(with_canary(small_site(), revision="r1", canary="r1")) == [
        "fab-platform:site.inference.models.qwen3-8b.canary.revision: 'r1' is the model's current revision; a canary "
        "serves the next one (promote it by setting revision: r1 and removing the canary)"
    ]


def test_fails_when_a_canarys_name_would_be_too_long():
    site = small_site()
    key = "m" * 55
    add_model(site, key)
    site["inference"]["models"][key]["canary"] = {"revision": "r2"}
    assert config_errors(site) == [
        f"fab-platform:site.inference.models.{key}.canary: the canary's Deployment and Service would be named "
        f"'vllm-{key}-canary' (67 characters, at most 63): use a model key of at most 51 characters"
    ]


@pytest.mark.parametrize(("weights_gib", "threshold"), [(16.0, 180), (131.5, 180), (1300.0, 320)])
def test_the_startup_probe_gives_large_models_time_to_load(weights_gib, threshold):
    assert serving.startup_failure_threshold(weights_gib) == threshold


def test_a_switch_to_argocd_hands_the_serving_objects_over_instead_of_deleting_them():
    site = small_site()
    result = diff(render(site), render(argocd(site)))
    assert sorted(c.urn.rsplit("::", 1)[-1] for c in result.handed_over) == [
        "inference-route-qwen3-8b", "inference-vllm-qwen3-8b", "inference-vllm-qwen3-8b-pdb", "inference-vllm-qwen3-8b-svc",
    ]
    assert [c.urn.rsplit("::", 1)[-1] for c in result.removed] == []


def test_the_handover_takes_each_object_out_of_the_stack_before_what_it_depends_on():
    config = delivered_by_pulumi({SITE_KEY: argocd(small_site())})
    commands = handover_commands(serving_tree(render(config[SITE_KEY]), config), "site-t")
    assert [c.rsplit("::", 1)[-1].rstrip("'") for c in commands] == [
        "inference-route-qwen3-8b", "inference-vllm-qwen3-8b-svc", "inference-vllm-qwen3-8b-pdb", "inference-vllm-qwen3-8b",
    ]
    assert commands[0].startswith("pulumi state delete --stack site-t --yes 'urn:pulumi:site-t::fab-platform::")


def test_delivery_argocd_authenticates_every_route_of_the_gateway():
    plan = render(argocd(small_site()))
    on_gateway = sorted((obj["kind"], obj["spec"]["targetRefs"])
                        for obj in (*plan.objects("SecurityPolicy", "site-t-gpu"), *plan.objects("BackendTrafficPolicy", "site-t-gpu"))
                        if obj["metadata"]["namespace"] == "envoy-gateway-system")
    target = [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "llm"}]
    assert on_gateway == [("BackendTrafficPolicy", target), ("SecurityPolicy", target)]
