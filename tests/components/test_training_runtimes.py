"""Training runtimes (issue 20, item 1): Kubeflow Trainer with its bundled JobSet where `training.runtimes` (on from
phase 03) installs it, Kueue's frameworks and the team, submitter and MultiKueue rules derived from what is installed,
and the platform's PyTorch ClusterTrainingRuntime with the cluster's NCCL settings and NVMe checkpoints."""

from __future__ import annotations

import yaml
from helpers import config_errors, render_small
from small_site import small_site

from components.runtimes import (
    RAY,
    RUNTIME_KINDS,
    TRAINER,
    kueue_frameworks,
    multikueue_rules,
    multikueue_watch_rules,
    submitter_rules,
    team_rules,
)
from fabctl.verify.runner import FINISHED, _pod_selector

TRAINER_CHART = "kubeflow-trainer"


def releases(plan, chart: str) -> list[dict]:
    return [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"].split("/")[-1] == chart]


def trainer_clusters(plan) -> list[str]:
    return sorted(plan.cluster(r) for r in releases(plan, TRAINER_CHART))


def frameworks(plan, cluster: str) -> list[str]:
    (kueue,) = [r for r in releases(plan, "kueue") if plan.cluster(r) == cluster]
    return yaml.safe_load(kueue["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])["integrations"]["frameworks"]


def runtimes(plan) -> dict[str, dict]:
    return {cluster: obj for cluster, obj, _ in plan.manifests() if obj["kind"] == "ClusterTrainingRuntime"}


def pod_spec(runtime: dict) -> dict:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job["template"]["spec"]["template"]["spec"]


def test_trainer_runs_on_every_gpu_cluster_and_the_multikueue_manager(full_plan):
    assert trainer_clusters(full_plan) == ["site-t-compute", "site-t-gpu", "site-t-gpu-train"]


def test_trainer_is_off_before_phase_3():
    site = small_site()
    site["phase"] = 2
    assert trainer_clusters(render_small(site)) == []


def test_runtimes_false_leaves_trainer_out_in_phase_5():
    site = small_site()
    site["training"] = {"runtimes": False, "ray": False}
    assert trainer_clusters(render_small(site)) == []


def test_kueue_admits_jobs_and_pods_only_without_runtimes():
    site = small_site()
    site["training"] = {"runtimes": False, "ray": False}
    assert frameworks(render_small(site), "site-t-gpu") == ["batch/job", "pod"]


def test_kueue_admits_trainjobs_and_jobsets_with_trainer(small_plan):
    assert frameworks(small_plan, "site-t-gpu") == [
        "batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "ray.io/rayjob", "ray.io/raycluster", "pod",
    ]


def test_the_manager_integrates_what_its_workers_do(full_plan):
    assert frameworks(full_plan, "site-t-compute") == frameworks(full_plan, "site-t-gpu")


def test_fails_when_runtimes_are_switched_on_before_phase_3():
    site = small_site()
    site["phase"] = 2
    site["training"] = {"runtimes": True}
    assert config_errors(site) == [
        ("fab-platform:site.training.runtimes: true installs Kubeflow Trainer and JobSet on the GPU clusters: training "
        "runtimes (Kubeflow Trainer's TrainJob and JobSet through Kueue) comes in phase 03 (training pipeline) and the site "
        "is at phase 2; do without it until phase 02 is done and phase is 3 (docs/roadmap.md), or list training-runtimes in "
        "early_features")
    ]


def test_every_installable_kind_is_one_multikueue_dispatches():
    # Kueue 0.19's MultiKueue adapters (the policy pack's MULTIKUEUE_FRAMEWORKS, fab-multikueue-supported-frameworks).
    from rules.kueue import MULTIKUEUE_FRAMEWORKS

    every = kueue_frameworks(set(RUNTIME_KINDS))
    assert every
    assert [f for f in every if f not in MULTIKUEUE_FRAMEWORKS] == []


def test_multikueue_may_handle_exactly_the_integrated_kinds():
    rules = multikueue_rules({TRAINER})
    kinds = {(rule["apiGroups"][0], resource) for rule in rules for resource in rule["resources"] if "/" not in resource}
    assert kinds == {("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs"), ("", "pods"),
                     ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "localqueues")}


def test_multikueue_watches_exactly_the_integrated_kinds_and_the_queues():
    rules = multikueue_watch_rules({TRAINER})
    kinds = {(rule["apiGroups"][0], resource) for rule in rules for resource in rule["resources"]}
    assert kinds == {("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("trainer.kubeflow.org", "trainjobs"), ("", "pods"),
                     ("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "localqueues")}


def test_the_workers_grant_multikueue_the_installed_kinds(full_plan):
    (role,) = [r for r in full_plan.objects("ClusterRole", "site-t-gpu") if r["metadata"]["name"] == "fab-multikueue"]
    assert role["rules"] == multikueue_rules({TRAINER, RAY})


def test_no_kind_without_its_operator_is_granted():
    granted = {group for rules in (team_rules(set()), submitter_rules(set()), multikueue_rules(set()), multikueue_watch_rules(set()))
               for rule in rules for group in rule["apiGroups"]}
    assert granted
    assert granted & {"jobset.x-k8s.io", "trainer.kubeflow.org", "kubeflow.org", "ray.io"} == set()


def test_airflow_submits_trainjobs_and_jobsets_with_trainer(full_plan):
    (role,) = [r for r in full_plan.objects("ClusterRole", "site-t-gpu") if r["metadata"]["name"] == "fab-airflow-submitter"]
    assert [(rule["apiGroups"], rule["resources"]) for rule in role["rules"]] == [
        (["batch"], ["jobs"]), (["jobset.x-k8s.io"], ["jobsets"]), (["trainer.kubeflow.org"], ["trainjobs"]),
        (["ray.io"], ["rayjobs"]),
    ]


def test_trainer_and_jobset_controllers_run_on_system_nodes(small_plan):
    (release,) = releases(small_plan, TRAINER_CHART)
    values = release["inputs"]["values"]
    assert "tolerations" not in values["manager"] and "jobset" in values and "controller" not in values["jobset"]
    assert values["manager"]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}


def test_trainer_installs_no_leaderworkerset_and_no_bundled_runtimes(small_plan):
    (release,) = releases(small_plan, TRAINER_CHART)
    values = release["inputs"]["values"]
    assert (values["dataCache"], values["runtimes"]) == ({"enabled": False}, {"defaultEnabled": False})


def test_the_runtime_is_the_same_on_every_cluster(full_plan):
    shipped = runtimes(full_plan)
    assert sorted(shipped) == ["site-t-compute", "site-t-gpu", "site-t-gpu-train"]
    assert shipped["site-t-compute"] == shipped["site-t-gpu"] == shipped["site-t-gpu-train"]


def test_the_manager_has_the_training_priority_class(full_plan):
    names = [p["metadata"]["name"] for p in full_plan.objects("PriorityClass", "site-t-compute")]
    assert names.count("fab-training") == 1


def test_the_runtime_trains_on_the_training_pool_at_training_priority(small_plan):
    pod = pod_spec(runtimes(small_plan)["site-t-gpu"])
    assert (pod["priorityClassName"], pod["nodeSelector"], pod["tolerations"]) == (
        "fab-training", {"fab.internal/gpu-pool": "training"},
        [{"key": "fab.internal/gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}],
    )


def test_the_runtime_loads_the_clusters_nccl_settings_and_the_teams_keys(small_plan):
    (node,) = pod_spec(runtimes(small_plan)["site-t-gpu"])["containers"]
    assert node["envFrom"] == [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}},
                               {"configMapRef": {"name": "nccl"}}]


def test_nccl_settings_name_the_configured_hcas_exactly():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"nccl_service_level": 3, "nccl_hcas": ["mlx5_0", "mlx5_1:1"]}
    (nccl,) = [obj for cluster, obj, _ in render_small(site).manifests()
               if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "nccl" and cluster == "site-t-gpu"]
    assert nccl["data"] == {"NCCL_IB_SL": "3", "NCCL_IB_TC": "0", "NCCL_IB_HCA": "=mlx5_0,mlx5_1:1"}


def test_nccl_names_no_hca_unless_configured(small_plan):
    (nccl,) = [obj for _, obj, _ in small_plan.manifests() if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "nccl"]
    assert nccl["data"] == {"NCCL_IB_SL": "0", "NCCL_IB_TC": "0"}


def test_fails_when_an_hca_is_not_a_device_name():
    site = small_site()
    site["gpu"]["gpu"]["infiniband"] = {"nccl_hcas": ["mlx5_0", "MLX5"]}
    assert config_errors(site) == [
        ("fab-platform:site.gpu.gpu.infiniband.nccl_hcas[1]: must be an RDMA device as `ibv_devices` lists it, optionally "
        "with a port: mlx5_0 or mlx5_0:1 (got 'MLX5')")
    ]


def test_the_runtime_requests_infiniband(small_plan):
    (node,) = pod_spec(runtimes(small_plan)["site-t-gpu"])["containers"]
    assert node["resources"]["limits"]["rdma/rdma_shared_ib"] == "1"


def test_checkpoints_go_to_an_nvme_volume_of_the_configured_size():
    site = small_site()
    site["training"] = {"checkpoint_cache_gib": 2048}
    pod = pod_spec(runtimes(render_small(site))["site-t-gpu"])
    (volume,) = [v for v in pod["volumes"] if v["name"] == "checkpoints"]
    claim = volume["ephemeral"]["volumeClaimTemplate"]["spec"]
    assert (claim["storageClassName"], claim["resources"]["requests"]["storage"]) == ("local-nvme-cache", "2048Gi")


def test_a_sidecar_uploads_checkpoints_to_the_teams_prefix(small_plan):
    pod = pod_spec(runtimes(small_plan)["site-t-gpu"])
    (upload,) = pod["initContainers"]
    assert (upload["restartPolicy"], upload["envFrom"]) == ("Always", [{"secretRef": {"name": "s3-training"}}])
    assert 'dest="${CHECKPOINT_URI}${TRAINJOB}/"' in upload["args"][0]
    assert {"name": "checkpoints", "mountPath": "/checkpoints", "readOnly": True} in upload["volumeMounts"]


def test_the_runtimes_containers_are_restricted(small_plan):
    pod = pod_spec(runtimes(small_plan)["site-t-gpu"])
    contexts = [c["securityContext"] for c in [*pod["initContainers"], *pod["containers"]]]
    assert len(contexts) == 2
    assert all(c["runAsNonRoot"] and c["readOnlyRootFilesystem"] and not c["allowPrivilegeEscalation"]
               and c["capabilities"] == {"drop": ["ALL"]} for c in contexts)


# --- the runner reads a TrainJob's MPI launcher (phase 01's NCCL check runs without Trainer: test_verify_nccl.py) ---------

def test_the_runner_reads_the_mpi_launchers_log_and_trainjob_conditions():
    assert (_pod_selector("TrainJob", "nccl-load"), FINISHED["TrainJob"]) == (
        "jobset.sigs.k8s.io/jobset-name=nccl-load,jobset.sigs.k8s.io/replicatedjob-name=launcher", ("Complete", "Failed"))


def test_kueue_does_not_count_the_shared_infiniband_resource(small_plan):
    (release,) = releases(small_plan, "kueue")
    config = yaml.safe_load(release["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["resources"] == {"excludeResourcePrefixes": ["rdma/"]}
