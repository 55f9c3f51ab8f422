"""TrainingPool behaviour: Kueue v1beta2 objects, quotas and their sums, MultiKueue, submission, profiles."""

from __future__ import annotations

import yaml

import pytest
from schemas import builtin_errors

from components.config import parse_site
from components.training import MULTIKUEUE_RULES, SUBMITTER_RULES
from helpers import render_site, site_raw

KUEUE_KINDS = {
    "ClusterQueue", "LocalQueue", "ResourceFlavor", "Cohort", "Topology", "WorkloadPriorityClass",
    "MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck",
}


def by_cluster(plan, kind: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for cluster, obj, _ in plan.manifests():
        if obj["kind"] == kind:
            out.setdefault(cluster, []).append(obj)
    return out


def gpu_quota(queue: dict, flavor: str) -> int:
    (group,) = queue["spec"]["resourceGroups"]
    (entry,) = [f for f in group["flavors"] if f["name"] == flavor]
    return int(next(r["nominalQuota"] for r in entry["resources"] if r["name"] == "nvidia.com/gpu"))


def test_every_kueue_object_is_v1beta2(plan):
    versions = {obj["apiVersion"] for _, obj, _ in plan.manifests() if obj["kind"] in KUEUE_KINDS}
    assert versions == {"kueue.x-k8s.io/v1beta2"}


def test_kueue_runs_on_every_gpu_cluster_and_the_manager(plan_a, plan_b):
    kueue = lambda plan: sorted(plan.cluster(r) for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue"))  # noqa: E731
    assert kueue(plan_a) == ["site-a-compute", "site-a-gpu", "site-a-gpu-train"]
    assert kueue(plan_b) == ["site-b-gpu"]


def test_kueue_manages_team_namespaces_only(plan_a):
    (release,) = [r for r in plan_a.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue") and plan_a.cluster(r) == "site-a-gpu"]
    config = yaml.safe_load(release["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": {"fab.internal/kueue-managed": "true"}}
    assert {"batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "pod"} <= set(config["integrations"]["frameworks"])
    assert config["manageJobsWithoutQueueName"] is False


def test_every_team_namespace_and_local_queue_exists_on_every_worker(plan_a):
    teams = sorted(parse_site(site_raw("site-a")).teams)
    queues = by_cluster(plan_a, "LocalQueue")
    for cluster in ("site-a-compute", "site-a-gpu", "site-a-gpu-train"):
        assert sorted(q["metadata"]["namespace"] for q in queues[cluster]) == [f"team-{t}" for t in teams], cluster


def test_manager_quotas_are_the_sum_of_the_workers(plan_a):
    queues = {c: {q["metadata"]["name"]: q for q in qs} for c, qs in by_cluster(plan_a, "ClusterQueue").items()}
    for name, manager_queue in queues["site-a-compute"].items():
        assert gpu_quota(manager_queue, "training-h200") == gpu_quota(queues["site-a-gpu"][name], "training-h200")
        assert gpu_quota(manager_queue, "training-h100") == gpu_quota(queues["site-a-gpu-train"][name], "training-h100")
    assert gpu_quota(queues["site-a-compute"]["team-defect-vision"], "training-h100") == 24


def test_manager_queues_wait_for_the_multikueue_check(plan_a):
    for queue in by_cluster(plan_a, "ClusterQueue")["site-a-compute"]:
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}


def test_no_multikueue_cluster_points_at_the_manager(plan_a):
    clusters = by_cluster(plan_a, "MultiKueueCluster")
    assert list(clusters) == ["site-a-compute"]
    assert sorted(c["metadata"]["name"] for c in clusters["site-a-compute"]) == ["gpu", "gpu-train"]
    (config,) = by_cluster(plan_a, "MultiKueueConfig")["site-a-compute"]
    assert config["spec"]["clusters"] == ["gpu", "gpu-train"]


def test_worker_kubeconfigs_are_secrets_in_the_managers_kueue_namespace(plan_a):
    secrets = [
        r for r in plan_a.of_type("kubernetes:core/v1:Secret")
        if plan_a.target(r) == "site-a-compute" and r["inputs"]["metadata"]["name"].startswith("multikueue-")
    ]
    assert sorted(s["inputs"]["metadata"]["name"] for s in secrets) == ["multikueue-gpu", "multikueue-gpu-train"]
    for secret in secrets:
        assert secret["inputs"]["metadata"]["namespace"] == "kueue-system"
        assert secret["inputs"]["stringData"] == {"kubeconfig": "[secret]"}


def test_the_manager_to_worker_flow_is_in_the_flow_table(plan_a):
    flow = plan_a.outputs["network"]["flows"]["multikueue"]
    assert (flow["from"], flow["to"], flow["port"], flow["target"]) == (["compute"], ["gpu", "gpu-train"], 6443, "kube-apiserver")


def test_training_flavors_select_training_nodes_only(plan):
    for cluster, flavors in by_cluster(plan, "ResourceFlavor").items():
        for flavor in flavors:
            labels = flavor["spec"].get("nodeLabels")
            if labels is not None:
                assert labels["fab.internal/gpu-pool"] == "training", cluster
                assert flavor["spec"]["tolerations"] == [
                    {"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
                ]


def test_team_queues_reclaim_within_the_cohort_and_preempt_lower_priority(plan_b):
    for queue in by_cluster(plan_b, "ClusterQueue")["site-b-gpu"]:
        assert queue["spec"]["cohortName"] == "site-b"
        assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
        assert queue["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"


def test_topology_comes_from_config_levels(plan_b):
    (topology,) = by_cluster(plan_b, "Topology")["site-b-gpu"]
    assert topology["spec"]["levels"] == [
        {"nodeLabel": "fab.internal/block"}, {"nodeLabel": "fab.internal/rack"}, {"nodeLabel": "kubernetes.io/hostname"}
    ]


def test_team_groups_are_bound_in_team_namespaces(plan_b):
    bindings = [b for b in plan_b.objects("RoleBinding", "site-b-gpu") if b["metadata"]["name"] == "team-members"]
    assert {b["metadata"]["namespace"]: b["subjects"][0]["name"] for b in bindings} == {
        "team-fdc": "oidc:team-fdc", "team-llm-apps": "oidc:team-llm-apps", "team-yield": "oidc:team-yield",
    }


def test_airflow_may_only_create_watch_and_delete_jobs(plan_b):
    (role,) = [r for r in plan_b.objects("ClusterRole", "site-b-gpu") if r["metadata"]["name"] == "fab-airflow-submitter"]
    assert role["rules"] == SUBMITTER_RULES
    assert {v for rule in role["rules"] for v in rule["verbs"]} == {"create", "delete", "get", "list", "watch"}
    bindings = [b for b in plan_b.objects("RoleBinding", "site-b-gpu") if b["metadata"]["name"] == "airflow-submitter"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-fdc", "team-llm-apps", "team-yield"]


def test_airflow_gets_a_kubeconfig_per_gpu_cluster(plan_a):
    secrets = [
        r["inputs"]["metadata"] for r in plan_a.of_type("kubernetes:core/v1:Secret")
        if plan_a.target(r) == "site-a-compute" and r["inputs"]["metadata"].get("namespace") == "airflow"
        and r["inputs"]["metadata"]["name"].endswith("-kubeconfig")
    ]
    assert sorted(m["name"] for m in secrets) == ["gpu-gpu-kubeconfig", "gpu-gpu-train-kubeconfig"]


def test_multikueue_access_is_what_kueue_needs(plan_a):
    (role,) = [r for r in plan_a.objects("ClusterRole", "site-a-gpu") if r["metadata"]["name"] == "fab-multikueue"]
    assert role["rules"] == MULTIKUEUE_RULES
    assert not any("secrets" in rule["resources"] or "*" in rule["verbs"] for rule in role["rules"])


def test_submission_contract_names_cluster_namespace_and_queue(plan_a, plan_b):
    assert plan_a.outputs["training"]["submission"]["yield"] == {"cluster": "site-a-compute", "namespace": "team-yield", "local_queue": "training"}
    assert plan_b.outputs["training"]["submission"]["fdc"] == {"cluster": "site-b-gpu", "namespace": "team-fdc", "local_queue": "training"}


def test_example_job_is_suspended_queued_and_pins_a_snapshot(plan_a):
    job = yaml.safe_load(plan_a.outputs["training"]["example_job"])
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ICEBERG_SNAPSHOT_ID"].isdigit() and env["ICEBERG_CATALOG_URI"] == "http://polaris.site-a.fab.internal:8181/api/catalog"
    job["metadata"]["name"] = "example"
    assert builtin_errors(job) == []


def test_switching_profiles_changes_only_node_pools_quotas_and_replicas():
    day = render_site("site-a", site_raw("site-a"))
    raw = site_raw("site-a")
    raw["active_profile"] = "night"
    night = render_site("site-a", raw)
    before = {r["urn"]: r for r in day.resources}
    after = {r["urn"]: r for r in night.resources}
    assert set(before) == set(after)
    changed = {before[u]["type"].rsplit(":", 1)[-1] for u in before if before[u]["inputs"] != after[u]["inputs"]}
    assert changed == {"NodeFeatureRule", "ClusterQueue", "Deployment"}
    deployments = [u for u in before if before[u]["inputs"] != after[u]["inputs"] and before[u]["type"].endswith("Deployment")]
    assert deployments == ["urn:pulumi:site-a::fab-platform::fab:inference:InferencePool$kubernetes:apps/v1:Deployment::inference-vllm-llama-3-3-70b"]
    assert after[deployments[0]]["inputs"]["spec"]["replicas"] == 2


def test_fails_when_a_quota_overcommits_the_training_pool():
    raw = site_raw("site-b")
    raw["training"]["quotas"]["fdc"]["gpu"]["gpus"] = 16
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == (
        "fab-platform:site.training.quotas: teams' GPU quotas on gpu add up to 24 (fdc 16, yield 8) but its training "
        "pool has 16 GPUs; lower nominal quotas and let teams borrow instead"
    )


def test_fails_when_a_profile_overcommits_the_training_pool():
    raw = site_raw("site-a")
    raw["profiles"]["night"]["node_pools"]["gpu"] = {"gpu-a-inf-03": "inference"}
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == (
        "fab-platform:site.profiles.night.quotas: teams' GPU quotas on gpu add up to 48 (defect-vision 16, vm-pdm 8, "
        "wafermap 16, yield 8) but its training pool has 32 GPUs (profile night); lower nominal quotas and let teams "
        "borrow instead"
    )


def test_fails_when_the_manager_is_its_own_worker():
    raw = site_raw("site-a")
    raw["training"]["multikueue"]["workers"] = ["compute", "gpu"]
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == (
        "fab-platform:site.training.multikueue.workers[0]: 'compute' is the MultiKueue manager; a manager is never its own worker"
    )


def test_fails_when_the_active_profile_does_not_exist():
    raw = site_raw("site-a")
    raw["active_profile"] = "weekend"
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value) == "fab-platform:site.active_profile: 'weekend' is not a profile; profiles: day, night"


def test_fails_when_a_profile_names_an_unknown_node():
    raw = site_raw("site-a")
    raw["profiles"]["night"]["node_pools"]["gpu"]["gpu-a-inf-09"] = "training"
    with pytest.raises(Exception) as info:
        parse_site(raw)
    assert str(info.value).startswith("fab-platform:site.profiles.night.node_pools.gpu.gpu-a-inf-09: 'gpu-a-inf-09' is not a node of gpu.gpu; nodes: ")
