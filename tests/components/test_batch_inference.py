"""Offline batch inference (`inference.batch`): a vLLM batch Job template per served model in every team namespace of the
GPU clusters, queued by Kueue at training priority, by reference through AIStor with the team's own keys."""

from __future__ import annotations

import json

import pytest
import yaml
from helpers import config_errors, render_small
from schemas import builtin_errors
from small_site import add_model, small_site

from components.batch_inference import CONFIG_MAP


def templates(plan, cluster: str = "site-t-gpu") -> dict[str, dict]:
    """namespace -> its ConfigMap batch-inference's data, on `cluster`."""
    return {cm["metadata"]["namespace"]: cm["data"] for cm in plan.objects("ConfigMap", cluster)
            if cm["metadata"]["name"] == CONFIG_MAP}


def job(plan, team: str = "yield", model: str = "qwen3-8b", cluster: str = "site-t-gpu") -> dict:
    return yaml.safe_load(templates(plan, cluster)[f"team-{team}"][f"{model}.yaml"])


def pod(plan) -> dict:
    return job(plan)["spec"]["template"]["spec"]


def containers(plan) -> dict[str, dict]:
    spec = pod(plan)
    return {c["name"]: c for c in [*spec["initContainers"], *spec["containers"]]}


@pytest.fixture(scope="module")
def two_teams():
    return render_small(small_site(gpu_clusters=2, teams=("fdc", "yield")))


@pytest.fixture(scope="module")
def batch_off():
    site = small_site()
    site["inference"]["batch"] = False
    return render_small(site)


def test_every_team_namespace_of_every_gpu_cluster_holds_the_templates(two_teams):
    found = {cluster: sorted(templates(two_teams, cluster)) for cluster in ("site-t-gpu", "site-t-gpu-train")}
    assert found == {"site-t-gpu": ["team-fdc", "team-yield"], "site-t-gpu-train": ["team-fdc", "team-yield"]}


def test_there_is_a_template_per_served_model():
    site = small_site()
    add_model(site, "qwen3-8b-fr")
    assert sorted(templates(render_small(site))["team-yield"]) == ["qwen3-8b-fr.yaml", "qwen3-8b.yaml"]


def test_the_template_is_a_valid_job(small_plan):
    assert builtin_errors(job(small_plan)) == []


def test_the_job_waits_suspended_on_the_teams_local_queue_at_training_priority(small_plan):
    submitted = job(small_plan)
    assert submitted["spec"]["suspend"] is True
    assert submitted["metadata"]["namespace"] == "team-yield"
    assert submitted["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training", "kueue.x-k8s.io/priority-class": "training-normal"}
    assert pod(small_plan)["priorityClassName"] == "fab-training"


def test_the_job_runs_on_the_training_pool(small_plan):
    spec = pod(small_plan)
    assert spec["nodeSelector"] == {"fab.internal/gpu-pool": "training"}
    assert spec["tolerations"] == [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]


def test_the_job_takes_the_models_tensor_parallel_gpus():
    site = small_site()
    site["inference"]["models"]["qwen3-8b"].update(params_billion=70.0, layers=80, concurrent_sequences=8)
    plan = render_small(site)
    tp = plan.outputs["capacity"]["qwen3-8b"]["tensor_parallel"]
    assert tp > 1
    vllm = containers(plan)["vllm"]
    assert vllm["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
    assert vllm["args"][vllm["args"].index("--tensor-parallel-size") + 1] == str(tp)


def test_the_job_runs_vllms_offline_runner_on_the_pinned_image(small_plan):
    from components.versions import VLLM_IMAGE

    vllm = containers(small_plan)["vllm"]
    assert (vllm["image"], vllm["command"], vllm["args"][0]) == (VLLM_IMAGE, ["vllm"], "run-batch")


def test_the_job_names_no_gateway(small_plan):
    assert "llm." not in json.dumps(job(small_plan))


def test_the_job_reads_only_the_teams_own_keys(small_plan):
    refs = {env["valueFrom"]["secretKeyRef"]["name"] for c in containers(small_plan).values()
            for env in c.get("env", []) if "secretKeyRef" in env.get("valueFrom", {})}
    assert refs == {"s3-training"}


def test_the_job_loads_the_served_weights_from_the_models_bucket(small_plan):
    assert containers(small_plan)["weights"]["args"] == [
        "mirror", "--overwrite", "--remove", "aistor/site-t-models/qwen/qwen3-8b/", "/models/qwen3-8b"]


def test_the_results_go_under_the_teams_checkpoint_prefix(small_plan):
    assert containers(small_plan)["results"]["args"] == [
        "cp", "/data/output.jsonl", "aistor/site-t-checkpoints/yield/batch-inference/$(JOB_NAME)/output.jsonl"]


def test_every_container_is_restricted(small_plan):
    spec = pod(small_plan)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    for container in containers(small_plan).values():
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert set(container["resources"]) == {"requests", "limits"}


def policy_of(plan, team: str) -> dict:
    (policy,) = [r for r in plan.of_type("minio:index/iamPolicy:IamPolicy") if r["inputs"]["name"] == f"fab-training-{team}"]
    return json.loads(policy["inputs"]["policy"])


def test_every_team_may_read_the_served_weights(small_plan):
    statements = {s.get("Sid"): s for s in policy_of(small_plan, "yield")["Statement"]}
    assert statements["ReadSharedObjects"]["Resource"] == ["arn:aws:s3:::site-t-models/qwen/qwen3-8b/*"]
    assert not [a for a in statements["ReadSharedObjects"]["Action"] if "Put" in a or "Delete" in a]


def test_weights_under_a_teams_prefix_are_shared_with_no_other_team():
    site = small_site(teams=("fdc", "yield"))
    add_model(site, "fdc-tuned", source="fdc/tuned/")
    plan = render_small(site)
    shared = {s.get("Sid"): s for s in policy_of(plan, "yield")["Statement"]}["ReadSharedObjects"]["Resource"]
    assert shared == ["arn:aws:s3:::site-t-models/qwen/qwen3-8b/*"]
    assert sorted(templates(plan)["team-yield"]) == ["qwen3-8b.yaml"]
    assert sorted(templates(plan)["team-fdc"]) == ["fdc-tuned.yaml", "qwen3-8b.yaml"]


def test_without_batch_there_are_no_templates(batch_off):
    assert templates(batch_off) == {}
    assert batch_off.outputs["batch_inference"] is None


def test_without_batch_teams_read_no_served_weights(batch_off):
    assert "ReadSharedObjects" not in {s.get("Sid") for s in policy_of(batch_off, "yield")["Statement"]}


def test_the_stack_output_names_the_config_map_and_each_models_gpus(small_plan):
    assert small_plan.outputs["batch_inference"] == {
        "config_map": "batch-inference", "models": {"qwen3-8b": {"key": "qwen3-8b.yaml", "tensor_parallel": 1}}}


def test_fails_when_batch_inference_comes_before_phase_3():
    site = small_site()
    site["phase"] = 2
    site["inference"]["batch"] = True
    assert config_errors(site) == [(
        "fab-platform:site.inference.batch: true gives every team a vLLM batch Job template: offline batch inference (vLLM "
        "batch Jobs queued by Kueue) comes in phase 03 (training pipeline) and the site is at phase 2; do without it until "
        "phase 02 is done and phase is 3 (docs/roadmap.md), or list batch-inference in early_features"
    )]


def manual_template() -> dict:
    """The Job of docs/gpus.md's "Offline batch inference" (its YAML block)."""
    from fabctl.render import PROJECT_DIR

    section = (PROJECT_DIR / "docs" / "gpus.md").read_text().split("\n## Offline batch inference\n", 1)[1]
    return yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])


def test_the_manuals_template_is_site_bs_for_team_yield(plan_b):
    shown, rendered = manual_template(), job(plan_b, cluster="site-b-gpu")
    assert shown["metadata"] == {k: rendered["metadata"][k] for k in shown["metadata"]}
    shown_args, rendered_args = steps(shown), steps(rendered)
    assert list(shown_args) == list(rendered_args)
    assert {name: args for name, args in shown_args.items() if args} == {
        name: rendered_args[name] for name, args in shown_args.items() if args}


def steps(job: dict) -> dict[str, list[str] | None]:
    """Each container's args, in the order the pod runs them."""
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c.get("args") for c in [*pod["initContainers"], *pod["containers"]]}
