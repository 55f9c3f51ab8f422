"""Both stack files switched to serving through Git (`inference.delivery: argocd`, Argo CD on compute): they render Argo
CD and its Application and AppProject, no serving object of their own, and `fabctl serving render` gives, strictly
valid, exactly what `delivery: pulumi` deploys. Tests of the stack files: what they serve is read from them."""

from __future__ import annotations

import pytest
from helpers import STACKS, render_config, rendered, stack_config
from schemas import CrdSchemas, schema_errors
from small_site import SERVING_REPO_TOKEN

from fabctl.policy import analyze_in_process
from fabctl.serving import delivered_by_pulumi, serving_tree
from fabctl.stackfile import SITE_KEY


def served_from_git(stack: str) -> dict:
    config = stack_config(stack)
    site = config[SITE_KEY]
    site["compute"]["argocd"] = {"enabled": True, "serving_repo": {"url": f"https://git.{site['domain']}/platform/serving.git"}}
    site["inference"]["delivery"] = "argocd"
    return {**config, **SERVING_REPO_TOKEN}


_PLANS: dict[str, object] = {}


@pytest.fixture(scope="module", params=STACKS)
def stack(request) -> tuple[str, dict, object]:
    if request.param not in _PLANS:
        _PLANS[request.param] = render_config(request.param, served_from_git(request.param))
    return request.param, served_from_git(request.param), _PLANS[request.param]


@pytest.fixture(scope="module")
def crds(crd_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir)


def test_the_stack_renders_the_application_of_its_serving_cluster(stack):
    name, config, plan = stack
    cluster = config[SITE_KEY]["inference"]["cluster"]
    apps = [(obj["metadata"]["name"], obj["spec"]["source"]["path"]) for obj in plan.objects("Application", f"{name}-compute")]
    assert apps == [(f"serving-{cluster}", f"sites/{name}/{cluster}")]


def test_the_stack_renders_the_serving_project(stack):
    name, _, plan = stack
    assert [obj["metadata"]["name"] for obj in plan.objects("AppProject", f"{name}-compute")] == ["serving"]


def test_the_argo_cd_objects_validate_strictly(stack, crds):
    _, _, plan = stack
    objects = [obj for obj in (*plan.objects("Application"), *plan.objects("AppProject"))]
    assert len(objects) == 2
    assert [errors for obj in objects if (errors := schema_errors(obj, crds))] == []


def test_the_stack_registers_no_vllm_deployment(stack):
    _, _, plan = stack
    assert [obj["metadata"]["name"] for obj in plan.objects("Deployment") if obj["metadata"]["name"].startswith("vllm-")] == []


def test_the_serving_repository_is_what_delivery_pulumi_deploys_and_validates_strictly(stack, crds):
    name, config, _ = stack
    pulumi_config = delivered_by_pulumi(config)
    tree = serving_tree(rendered(name), pulumi_config)
    models = sorted(config[SITE_KEY]["inference"]["models"])
    assert sorted({path.split("/")[1] for path in tree}) == models
    deployed = {(obj["kind"], obj["metadata"]["name"]): obj for _, obj, _ in rendered(name).manifests()}
    assert [path for path, (obj, _) in tree.items() if deployed[obj["kind"], obj["metadata"]["name"]] != obj] == []
    assert {path: errors for path, (obj, _) in tree.items() if (errors := schema_errors(obj, crds))} == {}


def test_the_stack_served_from_git_passes_every_policy(stack):
    _, _, plan = stack
    assert [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(plan)] == []
