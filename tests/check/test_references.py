"""fabctl check, references: every object a pod or a resource names is created by something, or declared existing."""

from __future__ import annotations

from components.config import parse_site
from small_site import small_site


def _vllm(small):
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    return deployment["spec"]["template"]["spec"]


def test_every_name_the_smallest_site_uses_exists(small):
    assert small.lines("references") == []


def _first_secret_ref(small) -> tuple[str, dict]:
    """Path and `secretKeyRef` of the first Secret the vLLM pod reads into its environment."""
    for i, container in enumerate(_vllm(small)["initContainers"]):
        for j, env in enumerate(container.get("env") or []):
            if "secretKeyRef" in env.get("valueFrom", {}):
                return f"spec.template.spec.initContainers[{i}].env[{j}].valueFrom.secretKeyRef", env["valueFrom"]["secretKeyRef"]
    raise AssertionError("the vLLM pod reads no Secret")


def test_fails_when_a_pod_names_a_secret_nothing_creates(small):
    path, ref = _first_secret_ref(small)
    ref["name"] = "s3-inference-typo"
    assert small.lines("references") == [
        f"error [references] site-t-gpu Deployment inference/vllm-qwen3-8b (inference-vllm-qwen3-8b): {path} names Secret "
        "inference/s3-inference-typo, which nothing creates. Fix: create Secret inference/s3-inference-typo in the program, "
        "fix the name, or declare it in check.existing.gpu"
    ]


def test_an_optional_secret_need_not_exist(small):
    _, ref = _first_secret_ref(small)
    ref.update(name="s3-inference-typo", optional=True)
    assert small.lines("references") == []


def test_a_secret_declared_existing_in_config_is_enough(small):
    _vllm(small)["imagePullSecrets"] = [{"name": "registry-pull"}]
    raw = small_site()
    raw["check"] = {"existing": {"gpu": ["Secret inference/registry-pull"]}}
    small.site = parse_site(raw)
    assert small.lines("references") == []


def test_fails_when_a_pod_names_a_priority_class_nothing_creates(small):
    _vllm(small)["priorityClassName"] = "fab-serving-typo"
    assert [f.problem for f in small.findings("references")] == [
        "spec.template.spec.priorityClassName names PriorityClass fab-serving-typo, which nothing creates"
    ]


def test_fails_when_a_chart_pod_names_a_service_account_nothing_creates(small):
    release = small.release("kueue", "site-t-gpu")
    (deployment,) = [o for o in release.objects if o["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["serviceAccountName"] = "kueue-typo"
    assert [f.line() for f in small.findings("references")] == [
        "error [references] site-t-gpu Deployment kueue-system/kueue-controller-manager (training-gpu-kueue (Helm release "
        "kueue)): spec.template.spec.serviceAccountName names ServiceAccount kueue-system/kueue-typo, which nothing creates. "
        "Fix: create ServiceAccount kueue-system/kueue-typo in the program, fix the name, or declare it in check.existing.gpu"
    ]


def test_secrets_an_operator_writes_for_its_database_count_as_created(small):
    from fabctl.check.picture import Picture

    (cluster,) = small.plan.objects("Cluster", "site-t-storage")
    picture = Picture(small.plan, small.site, small.releases, small.missing)
    name = cluster["metadata"]["name"]
    assert {p.subject for p in picture.derived if p.cluster == "site-t-storage" and p.name.startswith(name)} == {
        f"Secret polaris/{name}-{suffix}" for suffix in ("app", "ca", "server", "replication")
    }


def test_fails_when_a_pod_needs_a_database_secret_from_a_cluster_that_is_gone(small):
    (cluster,) = small.plan.objects("Cluster", "site-t-storage")
    cluster["metadata"]["name"] = "polaris-pg"
    problems = {f.problem.split(" names ", 1)[1] for f in small.findings("references")}
    assert problems == {"Secret polaris/polaris-db-app, which nothing creates"}


def test_names_a_missing_chart_may_create_are_notes(small):
    (job,) = [o for o in small.plan.objects("Job", "site-t-compute")]
    job["spec"]["template"]["spec"]["serviceAccountName"] = "made-by-airflow"
    job["metadata"]["namespace"] = "airflow"
    (finding,) = [f for f in small.findings("references") if "serviceAccountName" in f.problem]
    assert (finding.severity, finding.problem) == (
        "note", "spec.template.spec.serviceAccountName names ServiceAccount airflow/made-by-airflow, not in the picture; the "
        "unrendered releases compute-airflow may create it"
    )


def test_hooks_that_do_not_run_on_install_are_left_out(small):
    release = small.release("kueue", "site-t-gpu")
    release.objects.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "prune", "annotations": {"helm.sh/hook": "post-delete"}}, "spec": {"template": {"spec": {
            "serviceAccountName": "made-at-delete", "containers": [{"name": "p", "image": "example/prune:1.0"}]}}}})
    assert small.lines("references") == []
