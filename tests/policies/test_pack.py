"""The policy pack end to end: started as the Pulumi CLI starts it and driven over its Analyzer gRPC service.

The service analyzes the full small site (every optional part once) and, per group of rules, that site broken so that each
of them fires; on each of these the in-process analysis (fabctl.policy.analyze_in_process), which the rest of the suite
uses for its many small changes, must report exactly what the service reports. The stack files pass in process here,
and through the service in `.ci/run`, which plans each of them; each rule's own change is checked in process.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from google.protobuf import empty_pb2
from helpers import STACKS, rendered

from fabctl.policy import analyze_in_process, analyze_with
from fabctl.render import Plan

LEVELS = {0: "advisory", 1: "mandatory"}
EXPECTED_RULES = {
    "fab-no-gpu-outside-gpu-clusters": "mandatory",
    "fab-gpu-lb-private-only": "mandatory",
    "fab-gateway-local-traffic": "mandatory",
    "fab-routes-authenticated": "mandatory",
    "fab-cross-cluster-default-deny": "mandatory",
    "fab-flow-direction": "mandatory",
    "fab-credentials-have-flow": "mandatory",
    "fab-host-network-allow-listed": "mandatory",
    "fab-single-catalog-authority": "mandatory",
    "fab-bucket-least-privilege": "mandatory",
    "fab-stateful-protected": "mandatory",
    "fab-versioned-artifacts": "mandatory",
    "fab-residency": "mandatory",
    "fab-multikueue-not-own-worker": "mandatory",
    "fab-multikueue-quota-sum": "mandatory",
    "fab-serving-not-preemptible": "mandatory",
    "fab-training-kueue-managed": "advisory",
    "fab-training-ib-nccl-only": "mandatory",
    "fab-pinned-versions": "mandatory",
    "fab-pod-security": "mandatory",
    "fab-no-plaintext-secrets": "mandatory",
    "fab-no-gpu-spark-applications": "mandatory",
    "fab-no-gpu-helm-values": "mandatory",
    "fab-no-gpu-spark-conf": "mandatory",
    "fab-catalog-uri-polaris": "mandatory",
    "fab-no-hive-metastore": "mandatory",
    "fab-object-store-tables-denied": "mandatory",
    "fab-compute-pool-placement": "mandatory",
    "fab-compute-priority-class": "mandatory",
    "fab-compute-batch-below-interactive": "mandatory",
    "fab-starrocks-shared-data": "mandatory",
    "fab-starrocks-cn-cache": "mandatory",
    "fab-multikueue-supported-frameworks": "mandatory",
    "fab-training-flavor-topology": "mandatory",
    "fab-priority-class-exists": "mandatory",
    "fab-training-below-serving": "mandatory",
    "fab-training-preemptible": "mandatory",
    "fab-serving-not-kueue-managed": "mandatory",
    "fab-serving-no-queue-label": "mandatory",
    "fab-engine-reads-own-credentials": "mandatory",
    "fab-submitter-no-secrets": "mandatory",
    "fab-submitter-no-wildcards": "mandatory",
    "fab-team-namespace-own-credentials": "mandatory",
    "fab-team-policy-own-prefixes": "mandatory",
    "fab-privileged-allow-listed": "mandatory",
    "fab-privileged-namespace-allow-listed": "mandatory",
    "fab-replication-gold-only": "mandatory",
    "fab-ipoib-not-in-training-namespaces": "mandatory",
    "fab-ipoib-partition-key": "mandatory",
    "fab-ipoib-weights-route": "mandatory",
    "fab-training-nccl-service-level": "mandatory",
    "fab-gateway-jwt-issuer": "mandatory",
    "fab-gateway-jwt-jwks": "mandatory",
    "fab-gateway-jwt-audience": "mandatory",
    "fab-gateway-default-deny": "mandatory",
    "fab-gateway-team-rate-limits": "mandatory",
    "fab-gateway-rate-limits-global": "mandatory",
    "fab-gateway-rate-limit-backend": "mandatory",
    "fab-remote-training-replica-only": "mandatory",
}


def test_analyzer_info_lists_every_rule_with_its_level(grpc_pack):
    info = grpc_pack.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "fab-platform"
    assert {p.name: LEVELS[p.enforcementLevel] for p in info.policies} == EXPECTED_RULES
    assert all(p.description for p in info.policies)


_SERVICE: dict[str, list] = {}


def through_the_service(grpc_pack, name: str, plan: Plan) -> list:
    """The service's violations of a plan this module names, analyzed once."""
    if name not in _SERVICE:
        _SERVICE[name] = analyze_with(grpc_pack, plan)
    return _SERVICE[name]


@pytest.mark.parametrize("stack", STACKS)
def test_stack_passes_every_policy(stack):
    """In process; `.ci/run` then plans every stack file with the pack started as the CLI starts it."""
    assert [(v.policy, v.message) for v in analyze_in_process(rendered(stack))] == []


def test_the_full_small_site_passes_every_policy(grpc_pack, full_plan):
    assert [(v.policy, v.message) for v in through_the_service(grpc_pack, "full", full_plan)] == []


def test_the_in_process_analysis_of_the_full_small_site_is_the_services(grpc_pack, full_plan):
    assert analyze_in_process(full_plan) == through_the_service(grpc_pack, "full", full_plan)


# Each modification changes one thing in a render of the full small site (small_site.full_site), which passes every
# policy (the test above), as a mistaken change to the program would.

def modified(plan: Plan, edit: Callable[[list[dict[str, Any]]], None]) -> Plan:
    resources = copy.deepcopy(plan.resources)
    edit(resources)
    return dataclasses.replace(plan, resources=resources)


def find(resources: list[dict[str, Any]], type_suffix: str, name: str) -> dict[str, Any]:
    (match,) = [r for r in resources if r["type"].endswith(type_suffix) and r["name"] == name]
    return match


def containers_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    return record["inputs"]["spec"]["template"]["spec"]["containers"]


def gpu_on_compute(rs):
    containers_of(find(rs, ":Job", "compute-starrocks-setup-job"))[0]["resources"]["limits"]["nvidia.com/gpu"] = "1"


def public_gpu_vip(rs):
    proxy = find(rs, ":EnvoyProxy", "inference-envoy-proxy")
    proxy["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["annotations"]["lbipam.cilium.io/ips"] = "198.51.100.9"


def cluster_traffic(rs):
    find(rs, ":EnvoyProxy", "inference-envoy-proxy")["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["externalTrafficPolicy"] = "Cluster"


def no_jwt(rs):
    rs.remove(find(rs, ":SecurityPolicy", "inference-jwt-qwen3-8b"))


def gpu_train_not_an_s3_source(rs):
    rule = find(rs, ":CiliumClusterwideNetworkPolicy", "network-storage-policy-fab-flow-s3")
    for entry in rule["inputs"]["spec"]["ingress"]:
        entry["fromEndpoints"] = [e for e in entry["fromEndpoints"] if e["matchLabels"]["io.cilium.k8s.policy.cluster"] != "site-t-gpu-train"]


def no_default_deny(rs):
    rs.remove(find(rs, ":CiliumClusterwideNetworkPolicy", "network-gpu-train-policy-fab-default-deny-remote"))


def gpu_reaches_compute(rs):
    rule = find(rs, ":CiliumClusterwideNetworkPolicy", "network-compute-policy-fab-flow-compute-ingress")
    rule["inputs"]["spec"]["ingress"].append({"fromEndpoints": [{"matchLabels": {"io.cilium.k8s.policy.cluster": "site-t-gpu"}}],
                                              "toPorts": [{"ports": [{"port": "10443", "protocol": "TCP"}]}]})


def host_network(rs):
    find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["hostNetwork"] = True


def tables_reachable(rs):
    policy = find(rs, ":IamPolicy", "storage-spark-policy")
    document = json.loads(policy["inputs"]["policy"])
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    policy["inputs"]["policy"] = json.dumps(document)


def s3_star(rs):
    policy = find(rs, ":IamPolicy", "storage-trino-policy")
    document = json.loads(policy["inputs"]["policy"])
    document["Statement"][0]["Action"] = ["s3:*"]
    policy["inputs"]["policy"] = json.dumps(document)


def unprotected_bucket(rs):
    find(rs, ":S3Bucket", "storage-bucket-site-t-gold")["protect"] = False


def unversioned_models(rs):
    rs.remove(find(rs, ":S3BucketVersioning", "storage-bucket-site-t-models-versioning"))


def replicable_raw(rs):
    find(rs, ":BucketTags", "storage-bucket-site-t-raw-fdc-tags")["inputs"]["tags"]["fab.internal/residency"] = "replicable"


def own_worker(rs):
    find(rs, ":MultiKueueCluster", "training-compute-multikueue-cluster-gpu")["inputs"]["metadata"]["name"] = "compute"


def manager_quota(rs):
    queue = find(rs, ":ClusterQueue", "training-compute-queue-yield")
    queue["inputs"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "99"


def serving_priority(rs):
    find(rs, ":PriorityClass", "gpu-gpu-priority-training")["inputs"]["value"] = 2_000_000


def unqueued_job(rs):
    job = copy.deepcopy(find(rs, ":Job", "storage-job-polaris-bootstrap"))
    job["name"], job["urn"] = "stray-training", job["urn"] + "-stray"
    job["inputs"]["metadata"] = {"name": "stray-training", "namespace": "team-yield"}
    rs.append(job)


def ipoib_for_training(rs):
    pool = find(rs, ":IPPool", "gpu-gpu-ipoib-pool")
    pool["inputs"]["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["training"]


def ipoib_in_team_namespace(rs):
    find(rs, ":IPoIBNetwork", "gpu-gpu-ipoib-network")["inputs"]["spec"]["networkNamespace"] = "team-fdc"


def ipoib_default_partition(rs):
    find(rs, ":IPoIBNetwork", "gpu-gpu-ipoib-network")["inputs"]["spec"]["master"] = "ib0"


def weights_over_ethernet(rs):
    del find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["hostAliases"]


def nccl_without_service_level(rs):
    del find(rs, ":ConfigMap", "training-gpu-train-team-yield-nccl")["inputs"]["data"]["NCCL_IB_SL"]


def floating_chart(rs):
    find(rs, ":Release", "storage-polaris")["inputs"]["version"] = "1.x"


def writable_root(rs):
    containers_of(find(rs, ":Deployment", "inference-vllm-qwen3-8b"))[0]["securityContext"]["readOnlyRootFilesystem"] = False


def password_in_values(rs):
    find(rs, ":Release", "compute-trino")["inputs"]["values"]["auth"] = {"password": "Pl41nT3xtPassword"}


def spark_conf_edit(rs, key, value):
    """Airflow's SparkApplication template (`sparkapplication.yaml`) sets `key` in its sparkConf."""
    data = find(rs, ":ConfigMap", "compute-spark-application")["inputs"]["data"]
    app = yaml.safe_load(data["sparkapplication.yaml"])
    app["spec"]["sparkConf"][key] = value
    data["sparkapplication.yaml"] = yaml.safe_dump(app)


def spark_hive_catalog(rs):
    spark_conf_edit(rs, "spark.sql.catalog.fab.type", "hive")


def gpu_spark_application(rs):
    template = find(rs, ":ConfigMap", "compute-spark-application")
    app = copy.deepcopy(template)
    app["name"], app["urn"] = "compute-gpu-etl", app["urn"] + "-gpu-etl"
    app["type"] = "kubernetes:sparkoperator.k8s.io/v1beta2:SparkApplication"
    # A job from the platform's template (batch pool, its priority and queue), with GPUs on its executors.
    app["inputs"] = yaml.safe_load(template["inputs"]["data"]["sparkapplication.yaml"])
    app["inputs"]["metadata"]["name"] = "gpu-etl"
    spec = app["inputs"]["spec"]
    spec.update({"type": "Python", "sparkVersion": "4.0.1", "mainApplicationFile": "local:///app/etl.py"})
    spec["driver"].update({"cores": 1, "memory": "2g"})
    spec["executor"].update({"instances": 2, "cores": 4, "memory": "16g", "gpu": {"name": "nvidia.com/gpu", "quantity": 1}})
    rs.append(app)


def gpu_notebook_profile(rs):
    profile = find(rs, ":Release", "compute-jupyterhub")["inputs"]["values"]["singleuser"]["profileList"][0]
    profile["kubespawner_override"]["extra_resource_limits"] = {"nvidia.com/gpu": "1"}


def gpu_spark_defaults(rs):
    spark_conf_edit(rs, "spark.executor.resource.gpu.amount", "1")


def trino_catalog_elsewhere(rs):
    catalogs = find(rs, ":Release", "compute-trino")["inputs"]["values"]["catalogs"]
    catalogs["fab"] = catalogs["fab"].replace("http://polaris-rest.polaris.svc:8181", "http://catalog.example.com:8181")


def spark_metastore(rs):
    spark_conf_edit(rs, "spark.hadoop.hive.metastore.uris", "thrift://metastore:9083")


def untolerated_trino_workers(rs):
    find(rs, ":Release", "compute-trino")["inputs"]["values"]["worker"]["tolerations"] = []


def interactive_airflow_tasks(rs):
    find(rs, ":Release", "compute-airflow")["inputs"]["values"]["workers"]["kubernetes"]["priorityClassName"] = "compute-interactive"


def batch_above_interactive(rs):
    find(rs, ":PriorityClass", "compute-priority-batch")["inputs"]["value"] = 1000


def shared_nothing_starrocks(rs):
    find(rs, ":ConfigMap", "compute-starrocks-fe-conf")["inputs"]["data"]["fe.conf"] = "run_mode = shared_nothing\n"


def no_cache_class_on_compute(rs):
    rs.remove(find(rs, ":StorageClass", "compute-starrocks-cache"))


def kueue_config_edit(rs, release, change):
    values = find(rs, ":Release", release)["inputs"]["values"]["managerConfig"]
    config = yaml.safe_load(values["controllerManagerConfigYaml"])
    change(config)
    values["controllerManagerConfigYaml"] = yaml.safe_dump(config)


def spark_on_manager(rs):
    kueue_config_edit(rs, "training-compute-kueue", lambda c: c["integrations"]["frameworks"].append("sparkoperator.k8s.io/sparkapplication"))


def flavor_without_topology(rs):
    del find(rs, ":ResourceFlavor", "training-gpu-train-flavor-training-h100")["inputs"]["spec"]["topologyName"]


def vllm_class_missing(rs):
    find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]["priorityClassName"] = "fab-servng"


def urgent_training_at_serving(rs):
    find(rs, ":WorkloadPriorityClass", "training-gpu-priority-training-urgent")["inputs"]["value"] = 1_000_000


def queue_never_preempts(rs):
    find(rs, ":ClusterQueue", "training-gpu-queue-yield")["inputs"]["spec"]["preemption"]["withinClusterQueue"] = "Never"


def kueue_manages_every_namespace(rs):
    kueue_config_edit(rs, "training-gpu-kueue", lambda c: c.pop("managedJobsNamespaceSelector"))


def queued_vllm(rs):
    find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"


def starrocks_reads_trino_keys(rs):
    containers_of(find(rs, ":Job", "compute-starrocks-setup-job"))[0]["envFrom"].append({"secretRef": {"name": "s3-trino"}})


def submitter_reads_secrets(rs):
    find(rs, ":ClusterRole", "training-gpu-role-airflow-submitter")["inputs"]["rules"].append(
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})


def submitter_any_verb(rs):
    find(rs, ":ClusterRole", "training-gpu-role-airflow-submitter")["inputs"]["rules"][0]["verbs"] = ["*"]


def other_teams_keys(rs):
    find(rs, ":Secret", "storage-s3-training-gpu-team-yield")["inputs"]["metadata"]["labels"]["fab.internal/team"] = "fdc"


def whole_checkpoint_bucket(rs):
    policy = find(rs, ":IamPolicy", "storage-training-yield-policy")
    document = json.loads(policy["inputs"]["policy"])
    (objects,) = [s for s in document["Statement"] if s.get("Sid") == "TeamObjects"]
    objects["Resource"] = ["arn:aws:s3:::site-t-checkpoints/*"]
    policy["inputs"]["policy"] = json.dumps(document)


def privileged_serving(rs):
    containers_of(find(rs, ":Deployment", "inference-vllm-qwen3-8b"))[0]["securityContext"]["privileged"] = True


def privileged_storage_namespace(rs):
    find(rs, ":Namespace", "storage-ns-polaris")["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"


def raw_copied_out(rs):
    pod = find(rs, ":Deployment", "inference-vllm-qwen3-8b")["inputs"]["spec"]["template"]["spec"]
    (sync,) = [c for c in pod["initContainers"] if c["name"] == "weights-sync"]
    sync["args"] = ["mirror", "--overwrite", "models/site-t-raw-fdc", "peer/site-u-replica/site-t-raw-fdc"]


def jwt_provider(rs):
    return find(rs, ":SecurityPolicy", "inference-jwt-qwen3-8b")["inputs"]["spec"]["jwt"]["providers"][0]


def foreign_issuer(rs):
    jwt_provider(rs)["issuer"] = "https://keycloak.example.com/realms/fab"


def foreign_keys(rs):
    jwt_provider(rs)["remoteJWKS"]["uri"] = "https://keycloak.example.com/realms/fab/protocol/openid-connect/certs"


def any_audience(rs):
    jwt_provider(rs)["audiences"] = []


def allow_by_default(rs):
    find(rs, ":SecurityPolicy", "inference-jwt-qwen3-8b")["inputs"]["spec"]["authorization"]["defaultAction"] = "Allow"


def unlimited_team(rs):
    limits = find(rs, ":BackendTrafficPolicy", "inference-ratelimit-qwen3-8b")["inputs"]["spec"]["rateLimit"]
    for scope in ("global", "local"):
        limits[scope]["rules"][0]["clientSelectors"][0]["headers"].append(
            {"name": "x-fab-team", "type": "Exact", "value": "yield", "invert": True})


def local_limits(rs):
    spec = find(rs, ":BackendTrafficPolicy", "inference-ratelimit-qwen3-8b")["inputs"]["spec"]
    spec["rateLimit"] = {"local": spec["rateLimit"]["global"]}


def no_rate_limit_backend(rs):
    del find(rs, ":Release", "inference-envoy-gateway")["inputs"]["values"]["config"]


PLAN_EDITS = {
    "fab-no-gpu-outside-gpu-clusters": gpu_on_compute,
    "fab-gpu-lb-private-only": public_gpu_vip,
    "fab-gateway-local-traffic": cluster_traffic,
    "fab-routes-authenticated": no_jwt,
    "fab-cross-cluster-default-deny": no_default_deny,
    "fab-flow-direction": gpu_reaches_compute,
    "fab-credentials-have-flow": gpu_train_not_an_s3_source,
    "fab-host-network-allow-listed": host_network,
    "fab-single-catalog-authority": spark_hive_catalog,
    "fab-bucket-least-privilege": s3_star,
    "fab-stateful-protected": unprotected_bucket,
    "fab-versioned-artifacts": unversioned_models,
    "fab-residency": replicable_raw,
    "fab-multikueue-not-own-worker": own_worker,
    "fab-multikueue-quota-sum": manager_quota,
    "fab-serving-not-preemptible": serving_priority,
    "fab-training-kueue-managed": unqueued_job,
    "fab-training-ib-nccl-only": ipoib_for_training,
    "fab-pinned-versions": floating_chart,
    "fab-pod-security": writable_root,
    "fab-no-plaintext-secrets": password_in_values,
    "fab-no-gpu-spark-applications": gpu_spark_application,
    "fab-no-gpu-helm-values": gpu_notebook_profile,
    "fab-no-gpu-spark-conf": gpu_spark_defaults,
    "fab-catalog-uri-polaris": trino_catalog_elsewhere,
    "fab-no-hive-metastore": spark_metastore,
    "fab-object-store-tables-denied": tables_reachable,
    "fab-compute-pool-placement": untolerated_trino_workers,
    "fab-compute-priority-class": interactive_airflow_tasks,
    "fab-compute-batch-below-interactive": batch_above_interactive,
    "fab-starrocks-shared-data": shared_nothing_starrocks,
    "fab-starrocks-cn-cache": no_cache_class_on_compute,
    "fab-multikueue-supported-frameworks": spark_on_manager,
    "fab-training-flavor-topology": flavor_without_topology,
    "fab-priority-class-exists": vllm_class_missing,
    "fab-training-below-serving": urgent_training_at_serving,
    "fab-training-preemptible": queue_never_preempts,
    "fab-serving-not-kueue-managed": kueue_manages_every_namespace,
    "fab-serving-no-queue-label": queued_vllm,
    "fab-engine-reads-own-credentials": starrocks_reads_trino_keys,
    "fab-submitter-no-secrets": submitter_reads_secrets,
    "fab-submitter-no-wildcards": submitter_any_verb,
    "fab-team-namespace-own-credentials": other_teams_keys,
    "fab-team-policy-own-prefixes": whole_checkpoint_bucket,
    "fab-privileged-allow-listed": privileged_serving,
    "fab-privileged-namespace-allow-listed": privileged_storage_namespace,
    "fab-replication-gold-only": raw_copied_out,
    "fab-ipoib-not-in-training-namespaces": ipoib_in_team_namespace,
    "fab-ipoib-partition-key": ipoib_default_partition,
    "fab-ipoib-weights-route": weights_over_ethernet,
    "fab-training-nccl-service-level": nccl_without_service_level,
    "fab-gateway-jwt-issuer": foreign_issuer,
    "fab-gateway-jwt-jwks": foreign_keys,
    "fab-gateway-jwt-audience": any_audience,
    "fab-gateway-default-deny": allow_by_default,
    "fab-gateway-team-rate-limits": unlimited_team,
    "fab-gateway-rate-limits-global": local_limits,
    "fab-gateway-rate-limit-backend": no_rate_limit_backend,
    "fab-remote-training-replica-only": lambda rs: find(rs, ":IamUser", "storage-training-yield-user")["inputs"]["tags"].update(
        {"fab.internal/engine": "remote-training"}),  # the training keys, read as a peer's team's: they reach the warehouse
}


ALSO_TRIGGERED = {"fab-multikueue-not-own-worker": {"fab-multikueue-quota-sum"}}
"""A manager listed as its own worker also breaks the quota sum, which counts that worker."""


@pytest.mark.parametrize("rule", sorted(PLAN_EDITS))
def test_a_modified_site_triggers_the_rule(full_plan, rule):
    violations = analyze_in_process(modified(full_plan, PLAN_EDITS[rule]))
    assert {v.policy for v in violations} == {rule, *ALSO_TRIGGERED.get(rule, set())}
    assert all(v.level == EXPECTED_RULES[v.policy] for v in violations)


def test_every_rule_is_shown_violated_by_some_modified_site():
    assert set(PLAN_EDITS) == set(EXPECTED_RULES)


APART = (
    ("fab-gateway-rate-limits-global", "fab-serving-not-preemptible", "fab-training-below-serving"),
    ("fab-routes-authenticated",),
)
"""Rules whose changes hide others' when made together (a route without its SecurityPolicy has no JWT or rate limit to
judge; a serving class moved below training is both), each group broken on a site of its own. Every other rule's change
is made on one site: a new rule goes there unless its change hides another's."""
SERVICE_GROUPS = (tuple(sorted(set(PLAN_EDITS) - {rule for group in APART for rule in group})), *APART)


def test_the_service_groups_hold_every_rule_once():
    rules = [rule for group in SERVICE_GROUPS for rule in group]
    assert sorted(rules) == sorted(PLAN_EDITS)


def with_changes(plan: Plan, rules: tuple[str, ...]) -> Plan:
    return modified(plan, lambda rs: [PLAN_EDITS[rule](rs) for rule in rules])


@pytest.mark.parametrize("group", SERVICE_GROUPS, ids=[f"{group[0]}+{len(group) - 1}" for group in SERVICE_GROUPS])
def test_each_rule_fires_through_the_analyzer_service(grpc_pack, full_plan, group):
    violations = through_the_service(grpc_pack, ",".join(group), with_changes(full_plan, group))
    assert {v.policy for v in violations} == {*group, *(also for rule in group for also in ALSO_TRIGGERED.get(rule, set()))}
    assert all(v.level == EXPECTED_RULES[v.policy] for v in violations)


@pytest.mark.parametrize("group", SERVICE_GROUPS, ids=[f"{group[0]}+{len(group) - 1}" for group in SERVICE_GROUPS])
def test_the_in_process_analysis_of_a_broken_site_is_the_services(grpc_pack, full_plan, group):
    plan = with_changes(full_plan, group)
    assert analyze_in_process(plan) == through_the_service(grpc_pack, ",".join(group), plan)
