"""The Kueue and priority rules, each shown refusing a render of the full small site (which passes every policy) with one
breaking edit, through the real analyzer; then what they do with values unknown during a preview."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import yaml
from policy_fixtures import SAFE, check, k8s, kube, pod
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from fabctl.policy import analyze_in_process
from fabctl.render import Plan

GPU = "urn:pulumi:site-t::fab-platform::pulumi:pulumi:Stack$pulumi:providers:kubernetes::site-t-gpu"


def violations(plan: Plan, edit: Callable[[dict[str, dict[str, Any]]], None]) -> list[tuple[str, str]]:
    """(policy, message without the description line) of every violation of the full small site's render after `edit` (on records by logical name)."""
    resources = copy.deepcopy(plan.resources)
    edit({r["name"]: r for r in resources} | {"": resources})
    plan = dataclasses.replace(plan, resources=resources)
    return [(v.policy, v.message.splitlines()[-1]) for v in analyze_in_process(plan)]


def vllm_pod(by_name) -> dict[str, Any]:
    return by_name["inference-vllm-qwen3-8b"]["inputs"]["spec"]["template"]


def kueue_config(by_name, release: str) -> dict[str, Any]:
    return yaml.safe_load(by_name[release]["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])


def set_kueue_config(by_name, release: str, config: dict[str, Any]) -> None:
    by_name[release]["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(config, sort_keys=False)


def add_training_job(by_name, priority: str) -> None:
    """A training Job as Airflow submits it, in team-yield on the gpu cluster, at `priority`."""
    job = pod("Job", "train", "team-yield", SAFE, priorityClassName=priority, restartPolicy="Never")
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "training"}
    by_name[""].append({
        "urn": "urn:pulumi:site-t::fab-platform::kubernetes:batch/v1:Job::train", "type": "kubernetes:batch/v1:Job", "name": "train",
        "custom": True, "parent": None, "provider": GPU, "inputs": job, "dependencies": [], "protect": False,
    })


# fab-priority-class-exists ------------------------------------------------------------------------------------------

def test_fails_when_vllm_names_a_class_the_cluster_lacks(full_plan):
    def edit(by_name):
        vllm_pod(by_name)["spec"]["priorityClassName"] = "fab-servng"

    assert violations(full_plan, edit) == [("fab-priority-class-exists", (
        "vLLM Deployment inference/vllm-qwen3-8b on site-t-gpu names the PriorityClass 'fab-servng', which the plan does not "
        "create on site-t-gpu; PriorityClasses there: fab-serving, fab-training"
    ))]


def test_fails_when_vllm_names_no_class(full_plan):
    def edit(by_name):
        del vllm_pod(by_name)["spec"]["priorityClassName"]

    assert violations(full_plan, edit) == [("fab-priority-class-exists", (
        "vLLM Deployment inference/vllm-qwen3-8b on site-t-gpu names no PriorityClass, so its pods run at priority 0; name one "
        "the plan creates there (fab-serving, fab-training)"
    ))]


def test_fails_when_a_training_job_names_a_class_the_cluster_lacks(full_plan):
    assert violations(full_plan, lambda by_name: add_training_job(by_name, "compute-batch")) == [("fab-priority-class-exists", (
        "training Job team-yield/train on site-t-gpu names the PriorityClass 'compute-batch', which the plan does not create on "
        "site-t-gpu; PriorityClasses there: fab-serving, fab-training"
    ))]


def test_a_training_job_at_the_training_class_passes(full_plan):
    assert violations(full_plan, lambda by_name: add_training_job(by_name, "fab-training")) == []


# fab-serving-not-preemptible ----------------------------------------------------------------------------------------

def test_fails_when_a_class_on_the_serving_cluster_outranks_serving(full_plan):
    def edit(by_name):
        by_name["gpu-gpu-priority-training"]["inputs"]["value"] = 2_000_000

    assert violations(full_plan, edit) == [("fab-serving-not-preemptible", (
        "vLLM Deployment inference/vllm-qwen3-8b on site-t-gpu runs at PriorityClass fab-serving (1000000), which does not "
        "outrank fab-training (2000000) there; serving's class has the highest value on its cluster, so that nothing the "
        "platform runs preempts it"
    ))]


def test_classes_on_other_clusters_do_not_count(full_plan):
    def edit(by_name):
        by_name["gpu-gpu-train-priority-training"]["inputs"]["value"] = 2_000_000

    assert violations(full_plan, edit) == []


# fab-training-below-serving -----------------------------------------------------------------------------------------

def test_fails_when_a_workload_priority_class_reaches_serving(full_plan):
    def edit(by_name):
        by_name["training-gpu-priority-training-urgent"]["inputs"]["value"] = 1_000_000

    assert violations(full_plan, edit) == [("fab-training-below-serving", (
        "WorkloadPriorityClass training-urgent on site-t-gpu has the value 1000000, not below serving's PriorityClass "
        "fab-serving (1000000); training stays below serving"
    ))]


def test_fails_when_a_training_job_runs_at_serving_priority(full_plan):
    assert violations(full_plan, lambda by_name: add_training_job(by_name, "fab-serving")) == [("fab-training-below-serving", (
        "training Job team-yield/train on site-t-gpu runs at PriorityClass fab-serving (1000000), not below serving's "
        "fab-serving (1000000); training stays below serving, so that serving can always preempt it"
    ))]


# fab-training-preemptible -------------------------------------------------------------------------------------------

def test_fails_when_a_queue_never_preempts_within_itself(full_plan):
    def edit(by_name):
        by_name["training-gpu-queue-yield"]["inputs"]["spec"]["preemption"]["withinClusterQueue"] = "Never"

    assert violations(full_plan, edit) == [("fab-training-preemptible", (
        "ClusterQueue team-yield on site-t-gpu sets preemption.withinClusterQueue to Never, so more urgent work of the team "
        "never preempts its training; allowed: LowerPriority, LowerOrNewerEqualPriority (training is preemptible)"
    ))]


def test_fails_when_a_queue_leaves_reclaiming_unset(full_plan):
    def edit(by_name):
        del by_name["training-gpu-train-queue-fdc"]["inputs"]["spec"]["preemption"]["reclaimWithinCohort"]

    assert violations(full_plan, edit) == [("fab-training-preemptible", (
        "ClusterQueue team-fdc on site-t-gpu-train leaves preemption.reclaimWithinCohort unset (Never), so the quota it lends "
        "is never reclaimed from the training that borrowed it; allowed: Any, LowerPriority, LowerOrNewerEqualPriority "
        "(training is preemptible)"
    ))]


# fab-serving-not-kueue-managed --------------------------------------------------------------------------------------

SERVING_MANAGED = (
    "vLLM Deployment inference/vllm-qwen3-8b on site-t-gpu is in namespace inference, which Kueue's {selector} selects; Kueue "
    "never manages serving: select only training namespaces"
)


def test_fails_when_kueue_drops_its_namespace_selector(full_plan):
    def edit(by_name):
        config = kueue_config(by_name, "training-gpu-kueue")
        del config["managedJobsNamespaceSelector"]
        set_kueue_config(by_name, "training-gpu-kueue", config)

    selector = "default managedJobsNamespaceSelector (every namespace but kube-system and its own)"
    assert violations(full_plan, edit) == [("fab-serving-not-kueue-managed", SERVING_MANAGED.format(selector=selector))]


def test_fails_when_the_serving_namespace_is_labelled_for_kueue(full_plan):
    def edit(by_name):
        by_name["inference-ns-inference"]["inputs"]["metadata"]["labels"]["fab.internal/kueue-managed"] = "true"

    selector = 'managedJobsNamespaceSelector {"matchLabels": {"fab.internal/kueue-managed": "true"}}'
    found = violations(full_plan, edit)
    assert ("fab-serving-not-kueue-managed", SERVING_MANAGED.format(selector=selector)) in found
    # A namespace whose jobs Kueue admits may not hold the IPoIB network, and must hold NCCL's settings: the serving one
    # breaks both rules too.
    assert {policy for policy, _ in found} == {"fab-serving-not-kueue-managed", "fab-ipoib-not-in-training-namespaces",
                                               "fab-training-nccl-service-level"}


def test_fails_when_kueue_runs_the_charts_default_configuration(full_plan):
    def edit(by_name):
        del by_name["training-gpu-kueue"]["inputs"]["values"]["managerConfig"]

    selector = "default managedJobsNamespaceSelector (every namespace but kube-system and its own)"
    assert violations(full_plan, edit) == [("fab-serving-not-kueue-managed", SERVING_MANAGED.format(selector=selector))]


# fab-serving-no-queue-label -----------------------------------------------------------------------------------------

def test_fails_when_vllm_pods_carry_a_queue_label(full_plan):
    def edit(by_name):
        vllm_pod(by_name)["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"

    assert violations(full_plan, edit) == [("fab-serving-no-queue-label", (
        "serving Deployment inference/vllm-qwen3-8b on site-t-gpu carries kueue.x-k8s.io/queue-name=training on its pod "
        "template; Kueue never queues serving: remove the label"
    ))]


# fab-multikueue-supported-frameworks --------------------------------------------------------------------------------

def test_fails_when_the_manager_integrates_spark_applications(full_plan):
    def edit(by_name):
        config = kueue_config(by_name, "training-compute-kueue")
        config["integrations"]["frameworks"].append("sparkoperator.k8s.io/sparkapplication")
        set_kueue_config(by_name, "training-compute-kueue", config)

    assert violations(full_plan, edit) == [("fab-multikueue-supported-frameworks", (
        "Kueue on the MultiKueue manager site-t-compute integrates sparkoperator.k8s.io/sparkapplication, which MultiKueue "
        "cannot dispatch to workers (its workloads would be rejected); allowed: batch/job, jobset.x-k8s.io/jobset, "
        "kubeflow.org/jaxjob, kubeflow.org/mpijob, kubeflow.org/paddlejob, kubeflow.org/pytorchjob, kubeflow.org/tfjob, "
        "kubeflow.org/xgboostjob, trainer.kubeflow.org/trainjob, ray.io/raycluster, ray.io/rayjob, ray.io/rayservice, "
        "workload.codeflare.dev/appwrapper, pod, deployment, statefulset, leaderworkerset.x-k8s.io/leaderworkerset"
    ))]


def test_workers_may_integrate_what_multikueue_cannot_dispatch(full_plan):
    def edit(by_name):
        config = kueue_config(by_name, "training-gpu-train-kueue")
        config["integrations"]["frameworks"].append("sparkoperator.k8s.io/sparkapplication")
        set_kueue_config(by_name, "training-gpu-train-kueue", config)

    assert violations(full_plan, edit) == []


# fab-multikueue-quota-sum -------------------------------------------------------------------------------------------

def manager_quota(by_name, resource: str, amount: str) -> None:
    (flavor,) = by_name["training-compute-queue-yield"]["inputs"]["spec"]["resourceGroups"][0]["flavors"]
    (entry,) = [r for r in flavor["resources"] if r["name"] == resource]
    entry["nominalQuota"] = amount


def test_fails_when_a_managers_gpu_quota_is_not_its_workers_sum(full_plan):
    assert violations(full_plan, lambda by_name: manager_quota(by_name, "nvidia.com/gpu", "99")) == [("fab-multikueue-quota-sum", (
        "manager ClusterQueue team-yield on site-t-compute has the nominalQuota 99 of nvidia.com/gpu in flavor training-h100, "
        "but its workers (gpu, gpu-train) add up to 12; a manager's quota is the sum of its workers'"
    ))]


def test_fails_when_a_managers_memory_quota_is_not_its_workers_sum(full_plan):
    assert violations(full_plan, lambda by_name: manager_quota(by_name, "memory", "1Ti")) == [("fab-multikueue-quota-sum", (
        "manager ClusterQueue team-yield on site-t-compute has the nominalQuota 1Ti of memory in flavor training-h100, but its "
        "workers (gpu, gpu-train) add up to 1536Gi; a manager's quota is the sum of its workers'"
    ))]


def test_the_same_quota_written_in_other_units_passes(full_plan):
    assert violations(full_plan, lambda by_name: manager_quota(by_name, "cpu", "192000m")) == []


# fab-training-flavor-topology ---------------------------------------------------------------------------------------

def test_fails_when_a_workers_flavor_drops_its_topology(full_plan):
    def edit(by_name):
        del by_name["training-gpu-train-flavor-training-h100"]["inputs"]["spec"]["topologyName"]

    assert violations(full_plan, edit) == [("fab-training-flavor-topology", (
        "ResourceFlavor training-h100 on site-t-gpu-train names no topologyName; a training flavor carries its cluster's "
        "Topology so that Kueue places jobs topology-aware (Topologies there: fab-topology)"
    ))]


def test_fails_when_the_managers_flavor_has_no_topology(full_plan):
    def edit(by_name):
        by_name["training-compute-flavor-training-h100"]["inputs"]["spec"] = {}

    assert violations(full_plan, edit) == [("fab-training-flavor-topology", (
        "ResourceFlavor training-h100 on site-t-compute names no topologyName; a training flavor carries its cluster's "
        "Topology so that Kueue places jobs topology-aware (Topologies there: fab-topology)"
    ))]


def test_fails_when_a_flavor_names_a_topology_its_cluster_lacks(full_plan):
    def edit(by_name):
        by_name["training-gpu-flavor-training-h100"]["inputs"]["spec"]["topologyName"] = "fab-topo"

    assert violations(full_plan, edit) == [("fab-training-flavor-topology", (
        "ResourceFlavor training-h100 on site-t-gpu names the Topology 'fab-topo', which the plan does not create on "
        "site-t-gpu; Topologies there: fab-topology"
    ))]


# Values unknown during a preview ------------------------------------------------------------------------------------

FAILS_CLOSED = "can't be known during preview, and this rule decides on it, so it fails closed"


def vllm(priority: Any) -> dict[str, Any]:
    obj = pod("Deployment", "vllm-a", "inference", SAFE, priorityClassName=priority)
    obj["metadata"]["labels"] = {"app.kubernetes.io/name": "vllm"}
    return obj


def resource_of(obj: dict[str, Any]) -> Any:
    """A Kubernetes object on site-a-gpu whose metadata (hence its name) may be unknown."""
    from policy_fixtures import resource

    return resource(f"kubernetes:{obj['apiVersion']}:{obj['kind']}", obj, name="x", cluster="site-a-gpu")


def kueue_release(config: Any) -> Any:
    from policy_fixtures import resource

    return resource("kubernetes:helm.sh/v3:Release", {"chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.19.2",
                                                      "values": {"managerConfig": {"controllerManagerConfigYaml": config}}},
                    name="kueue", cluster="site-a-gpu")


def test_an_unknown_serving_class_fails_closed():
    from rules.priorities import priority_class_exists

    (message,) = check(priority_class_exists, [kube(vllm(UNKNOWN_STRING_VALUE), "site-a-gpu")])
    assert message.startswith(f"Deployment inference/vllm-a on site-a-gpu: .priorityClassName {FAILS_CLOSED}")


def test_a_deployment_with_unknown_metadata_fails_closed_without_crashing():
    from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE
    from rules.priorities import priority_class_exists

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": UNKNOWN_OBJECT_VALUE,
                  "spec": {"template": {"spec": {"containers": []}}}}
    (message,) = check(priority_class_exists, [resource_of(deployment)])
    assert message.startswith(f"Deployment <unknown during preview> on site-a-gpu: .priorityClassName {FAILS_CLOSED}")


def test_an_unknown_kueue_configuration_fails_serving_closed():
    from rules.kueue import serving_not_kueue_managed

    (message,) = check(serving_not_kueue_managed, [kube(vllm("fab-serving"), "site-a-gpu"), kueue_release(UNKNOWN_STRING_VALUE)])
    assert message.startswith(f"Deployment inference/vllm-a on site-a-gpu: .kueue {FAILS_CLOSED}")


def test_an_unknown_worker_quota_fails_the_sum_closed():
    from rules.kueue import multikueue_quota_sum

    def queue(gpus: Any) -> dict[str, Any]:
        return k8s("ClusterQueue", "team-yield", api="kueue.x-k8s.io/v1beta2", spec={"resourceGroups": [{"flavors": [
            {"name": "training-h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]})

    stack = [kube(k8s("MultiKueueCluster", "gpu", api="kueue.x-k8s.io/v1beta2"), "site-a-compute"),
             kube(queue("8"), "site-a-compute"), kube(queue(UNKNOWN_STRING_VALUE), "site-a-gpu")]
    (message,) = check(multikueue_quota_sum, stack)
    assert message.startswith(f"ClusterQueue team-yield on site-a-compute or its workers: [1][0].flavors[0].resources[0].nominalQuota {FAILS_CLOSED}")
