"""TrainingPool behaviour on small sites: Kueue v1beta2 objects, quotas and their sums, MultiKueue, submission, profiles."""

from __future__ import annotations

import yaml

from schemas import builtin_errors

from helpers import config_errors, render_small
from small_site import add_team, small_site

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


RW = ["create", "delete", "get", "list", "watch", "update", "patch"]


def test_every_kueue_object_is_v1beta2(full_plan):
    versions = {obj["apiVersion"] for _, obj, _ in full_plan.manifests() if obj["kind"] in KUEUE_KINDS}
    assert versions == {"kueue.x-k8s.io/v1beta2"}


def kueue_clusters(plan) -> list[str]:
    return sorted(plan.cluster(r) for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue"))


def test_kueue_runs_on_every_gpu_cluster(small_plan):
    assert kueue_clusters(small_plan) == ["site-t-gpu"]


def test_kueue_runs_on_the_multikueue_manager_too(full_plan):
    assert kueue_clusters(full_plan) == ["site-t-compute", "site-t-gpu", "site-t-gpu-train"]


def test_kueue_manages_team_namespaces_only(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue")]
    config = yaml.safe_load(release["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["managedJobsNamespaceSelector"] == {"matchLabels": {"fab.internal/kueue-managed": "true"}}
    assert {"batch/job", "pod"} <= set(config["integrations"]["frameworks"])


def test_kueue_takes_the_jobs_of_team_namespaces_that_name_no_queue(small_plan):
    (release,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].endswith("/kueue")]
    config = yaml.safe_load(release["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["manageJobsWithoutQueueName"] is True


def test_every_team_namespace_and_local_queue_exists_on_every_worker_and_the_manager(full_plan):
    queues = {c: sorted((q["metadata"]["namespace"], q["metadata"]["name"]) for q in qs) for c, qs in by_cluster(full_plan, "LocalQueue").items()}
    expected = [("team-fdc", "training"), ("team-yield", "training")]
    assert queues == {"site-t-compute": expected, "site-t-gpu": expected, "site-t-gpu-train": expected}


def test_manager_quotas_are_the_sum_of_the_workers(full_plan):
    # yield: 4 GPUs on gpu and 8 on gpu-train, both H100; fdc: 4 on gpu only.
    queues = {c: {q["metadata"]["name"]: gpu_quota(q, "training-h100") for q in qs} for c, qs in by_cluster(full_plan, "ClusterQueue").items()}
    assert queues == {
        "site-t-compute": {"team-fdc": 4, "team-yield": 12},
        "site-t-gpu": {"team-fdc": 4, "team-yield": 4},
        "site-t-gpu-train": {"team-fdc": 0, "team-yield": 8},
    }


def test_manager_queues_wait_for_the_multikueue_check(full_plan):
    queues = by_cluster(full_plan, "ClusterQueue")["site-t-compute"]
    assert queues
    for queue in queues:
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}


def test_no_multikueue_cluster_points_at_the_manager(full_plan):
    clusters = by_cluster(full_plan, "MultiKueueCluster")
    assert list(clusters) == ["site-t-compute"]
    assert sorted(c["metadata"]["name"] for c in clusters["site-t-compute"]) == ["gpu", "gpu-train"]
    (config,) = by_cluster(full_plan, "MultiKueueConfig")["site-t-compute"]
    assert config["spec"]["clusters"] == ["gpu", "gpu-train"]


def test_worker_kubeconfigs_are_secrets_in_the_managers_kueue_namespace(full_plan):
    secrets = [
        r for r in full_plan.of_type("kubernetes:core/v1:Secret")
        if full_plan.target(r) == "site-t-compute" and r["inputs"]["metadata"]["name"].startswith("multikueue-")
    ]
    assert sorted(s["inputs"]["metadata"]["name"] for s in secrets) == ["multikueue-gpu", "multikueue-gpu-train"]
    for secret in secrets:
        assert secret["inputs"]["metadata"]["namespace"] == "kueue-system"
        assert secret["inputs"]["stringData"] == {"kubeconfig": "[secret]"}


def test_the_manager_to_worker_flow_is_added_to_the_default_flow_table():
    site = small_site(gpu_clusters=2, multikueue=True)
    flow = render_small(site).outputs["network"]["flows"]["multikueue"]
    assert (flow["from"], flow["to"], flow["port"], flow["target"]) == (["compute"], ["gpu", "gpu-train"], 6443, "kube-apiserver")


def test_training_flavors_select_training_nodes_only(full_plan):
    selecting = [(cluster, f["spec"]) for cluster, flavors in by_cluster(full_plan, "ResourceFlavor").items() for f in flavors
                 if f["spec"].get("nodeLabels") is not None]
    assert sorted(cluster for cluster, _ in selecting) == ["site-t-compute", "site-t-gpu", "site-t-gpu-train"]
    for _, spec in selecting:
        assert spec["nodeLabels"]["fab.internal/gpu-pool"] == "training"
        assert spec["tolerations"] == [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}]


def test_team_queues_reclaim_within_the_cohort_and_preempt_lower_priority(full_plan):
    queues = by_cluster(full_plan, "ClusterQueue")["site-t-gpu"]
    assert queues
    for queue in queues:
        assert queue["spec"]["cohortName"] == "site-t"
        assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
        assert queue["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"


def test_topology_comes_from_config_levels():
    site = small_site()
    site["training"] = {"topology_levels": ["fab.internal/row", "kubernetes.io/hostname"]}
    (topology,) = by_cluster(render_small(site), "Topology")["site-t-gpu"]
    assert topology["spec"]["levels"] == [{"nodeLabel": "fab.internal/row"}, {"nodeLabel": "kubernetes.io/hostname"}]


def test_the_default_topology_is_block_rack_host(small_plan):
    (topology,) = by_cluster(small_plan, "Topology")["site-t-gpu"]
    assert topology["spec"]["levels"] == [
        {"nodeLabel": "fab.internal/block"}, {"nodeLabel": "fab.internal/rack"}, {"nodeLabel": "kubernetes.io/hostname"}
    ]


def test_team_groups_are_bound_in_team_namespaces(full_plan):
    bindings = [b for b in full_plan.objects("RoleBinding", "site-t-gpu") if b["metadata"]["name"] == "team-members"]
    assert {b["metadata"]["namespace"]: b["subjects"][0]["name"] for b in bindings} == {
        "team-fdc": "oidc:team-fdc", "team-yield": "oidc:team-yield",
    }


def test_airflow_may_only_create_watch_and_delete_jobs_in_team_namespaces(full_plan):
    (role,) = [r for r in full_plan.objects("ClusterRole", "site-t-gpu") if r["metadata"]["name"] == "fab-airflow-submitter"]
    verbs = ["create", "delete", "get", "list", "watch"]
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": verbs},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": verbs},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": verbs},
        {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": verbs},
    ]
    bindings = [b for b in full_plan.objects("RoleBinding", "site-t-gpu") if b["metadata"]["name"] == "airflow-submitter"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-fdc", "team-yield"]
    assert [r for r in full_plan.objects("ClusterRoleBinding", "site-t-gpu") if r["roleRef"]["name"] == "fab-airflow-submitter"] == []


def test_airflow_gets_a_kubeconfig_per_gpu_cluster(full_plan):
    secrets = [
        r["inputs"]["metadata"] for r in full_plan.of_type("kubernetes:core/v1:Secret")
        if full_plan.target(r) == "site-t-compute" and r["inputs"]["metadata"].get("namespace") == "airflow"
        and r["inputs"]["metadata"]["name"].endswith("-kubeconfig")
    ]
    assert sorted(m["name"] for m in secrets) == ["gpu-gpu-kubeconfig", "gpu-gpu-train-kubeconfig"]


def test_multikueue_access_is_what_kueue_needs(full_plan):
    # Kueue's MultiKueue worker setup: the job kinds it dispatches, their pods, and its workloads; never secrets.
    (role,) = [r for r in full_plan.objects("ClusterRole", "site-t-gpu-train") if r["metadata"]["name"] == "fab-multikueue"]
    assert role["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": RW},
        {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": RW},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": RW},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs/status"], "verbs": ["get"]},
        {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": RW},
        {"apiGroups": ["ray.io"], "resources": ["rayjobs/status"], "verbs": ["get"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": RW},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters/status"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": RW},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": RW},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "list", "watch"]},
    ]


def test_multikueue_writes_in_the_team_namespaces_of_a_worker_only(full_plan):
    bindings = [b for b in full_plan.objects("RoleBinding", "site-t-gpu-train") if b["roleRef"]["name"] == "fab-multikueue"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-fdc", "team-yield"]
    assert [b for b in full_plan.objects("ClusterRoleBinding", "site-t-gpu-train") if b["roleRef"]["name"] == "fab-multikueue"] == []


def test_multikueue_reads_what_kueue_watches_cluster_wide_and_writes_nothing_there(full_plan):
    (binding,) = [b for b in full_plan.objects("ClusterRoleBinding", "site-t-gpu-train") if b["subjects"][0]["name"] == "multikueue"]
    (role,) = [r for r in full_plan.objects("ClusterRole", "site-t-gpu-train") if r["metadata"]["name"] == binding["roleRef"]["name"]]
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"get", "list", "watch"}
    assert {resource for rule in role["rules"] for resource in rule["resources"]} == {
        "jobs", "jobsets", "trainjobs", "rayjobs", "rayclusters", "pods", "workloads", "clusterqueues", "localqueues"}


def test_teams_submit_to_the_gpu_cluster_without_multikueue(small_plan):
    assert small_plan.outputs["training"]["submission"] == {
        "yield": {"cluster": "site-t-gpu", "namespace": "team-yield", "local_queue": "training"},
    }


def test_teams_submit_to_the_manager_with_multikueue(full_plan):
    assert full_plan.outputs["training"]["submission"] == {
        "fdc": {"cluster": "site-t-compute", "namespace": "team-fdc", "local_queue": "training"},
        "yield": {"cluster": "site-t-compute", "namespace": "team-yield", "local_queue": "training"},
    }


def test_example_job_is_suspended_queued_and_pins_a_snapshot(small_plan):
    job = yaml.safe_load(small_plan.outputs["training"]["example_job"])
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["ICEBERG_SNAPSHOT_ID"].isdigit() and env["ICEBERG_CATALOG_URI"] == "http://polaris-rest.polaris.svc:8181/api/catalog"
    job["metadata"]["name"] = "example"
    assert builtin_errors(job) == []


def night_site() -> dict:
    """Two inference nodes by day; by night one of them trains, yield's quota doubles and the model keeps one replica."""
    site = small_site()
    site["gpu"]["gpu"]["nodes"]["gpu-inf-2"] = {"gpu_type": "h100", "gpus": 8, "pool": "inference"}
    site["training"] = {"quotas": {"yield": {"gpu": {"gpus": 8}}}}
    site["profiles"] = {"night": {"node_pools": {"gpu": {"gpu-inf-2": "training"}}, "replicas": {"qwen3-8b": 1},
                                  "quotas": {"yield": {"gpu": {"gpus": 16}}}}}
    return site


def test_switching_profiles_changes_only_node_pools_quotas_and_replicas():
    site = night_site()
    day = render_small(site)
    site["active_profile"] = "night"
    night = render_small(site)
    before = {r["urn"]: r for r in day.resources}
    after = {r["urn"]: r for r in night.resources}
    assert set(before) == set(after)
    changed = {before[u]["type"].rsplit(":", 1)[-1] for u in before if before[u]["inputs"] != after[u]["inputs"]}
    assert changed == {"NodeFeatureRule", "ClusterQueue", "Deployment"}
    deployments = [u for u in before if before[u]["inputs"] != after[u]["inputs"] and before[u]["type"].endswith("Deployment")]
    assert deployments == ["urn:pulumi:site-t::fab-platform::fab:inference:InferencePool$kubernetes:apps/v1:Deployment::inference-vllm-qwen3-8b"]
    assert (before[deployments[0]]["inputs"]["spec"]["replicas"], after[deployments[0]]["inputs"]["spec"]["replicas"]) == (2, 1)


def test_fails_when_a_quota_overcommits_the_training_pool():
    site = small_site(teams=("yield",))
    add_team(site, "fdc", {"gpu": 8})
    site["training"]["quotas"]["yield"] = {"gpu": {"gpus": 4}}
    assert config_errors(site) == [
        "fab-platform:site.training.quotas: teams' GPU quotas on gpu add up to 12 (fdc 8, yield 4) but its training "
        "pool has 8 GPUs; lower nominal quotas and let teams borrow instead"
    ]


def test_fails_when_a_profile_overcommits_the_training_pool():
    site = night_site()
    site["profiles"]["night"]["node_pools"]["gpu"] = {"gpu-trn-1": "inference"}
    assert config_errors(site) == [
        "fab-platform:site.profiles.night.quotas: teams' GPU quotas on gpu add up to 16 (yield 16) but its training pool "
        "has 0 GPUs (profile night); lower nominal quotas and let teams borrow instead"
    ]


def test_fails_when_the_manager_is_its_own_worker():
    site = small_site(multikueue=True)
    site["training"]["multikueue"]["workers"] = ["compute", "gpu"]
    assert config_errors(site) == [
        "fab-platform:site.training.multikueue.workers[0]: 'compute' is the MultiKueue manager; a manager is never its own worker"
    ]


def test_fails_when_the_active_profile_does_not_exist():
    site = night_site()
    site["active_profile"] = "weekend"
    assert config_errors(site) == ["fab-platform:site.active_profile: 'weekend' is not a profile; profiles: night"]


def test_fails_when_a_profile_names_an_unknown_node():
    site = night_site()
    site["profiles"]["night"]["node_pools"]["gpu"]["gpu-inf-9"] = "training"
    assert config_errors(site) == [
        "fab-platform:site.profiles.night.node_pools.gpu.gpu-inf-9: 'gpu-inf-9' is not a node of gpu.gpu; nodes: gpu-inf-1, "
        "gpu-inf-2, gpu-trn-1"
    ]
