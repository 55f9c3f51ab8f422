"""Each rule alone: one compliant fixture, then one failing fixture per message, changing a single property."""

from __future__ import annotations

import copy
import json

import pytest
from policy_fixtures import SAFE, check, k8s, kube, pod, resource

from rules import POLICIES
from rules.gpu import gpu_lb_private_only, no_gpu_outside_gpu_clusters, serving_not_preemptible, training_ib_nccl_only, training_kueue_managed
from rules.kueue import multikueue_not_own_worker, multikueue_quota_sum
from rules.network import cross_cluster_default_deny, gateway_local_traffic, routes_authenticated
from rules.storage import bucket_least_privilege, residency, single_catalog_authority, stateful_protected, versioned_artifacts
from rules.workloads import host_network_allow_listed, no_plaintext_secrets, pinned_versions, pod_security


def test_every_rule_has_a_fab_id_and_a_description():
    assert len(POLICIES) == 21
    assert all(p.name.startswith("fab-") and p.description.endswith(".") for p in POLICIES)
    assert len({p.name for p in POLICIES}) == 21


# fab-no-gpu-outside-gpu-clusters ---------------------------------------------------------------

GPU_JOB = pod("Job", "train", "team-yield", {**SAFE, "resources": {"limits": {"nvidia.com/gpu": "1"}}})


def test_gpu_workloads_on_gpu_clusters_pass():
    assert check(no_gpu_outside_gpu_clusters, [kube(GPU_JOB, "site-a-gpu", gpu=True)]) == []


def test_fails_when_a_compute_workload_requests_a_gpu():
    assert check(no_gpu_outside_gpu_clusters, [kube(GPU_JOB, "site-a-compute")]) == [
        "Job team-yield/train requests nvidia.com/gpu on site-a-compute, which is not a GPU cluster"
    ]


# fab-gpu-lb-private-only --------------------------------------------------------------------

def lb_service(ip: str) -> dict:
    return k8s("Service", "gw", "ns", annotations={"lbipam.cilium.io/ips": ip}, spec={"type": "LoadBalancer"})


def test_private_gpu_addresses_pass():
    assert check(gpu_lb_private_only, [kube(lb_service("10.10.103.10"), "site-a-gpu", gpu=True)]) == []


def test_fails_when_a_gpu_service_asks_for_a_public_address():
    assert check(gpu_lb_private_only, [kube(lb_service("198.51.100.7"), "site-a-gpu", gpu=True)]) == [
        "Service gw on site-a-gpu asks for the public address 198.51.100.7; GPU clusters use RFC1918 addresses only"
    ]


def test_fails_when_a_gpu_pool_has_a_public_block():
    pool = k8s("CiliumLoadBalancerIPPool", "external", api="cilium.io/v2", spec={"blocks": [{"cidr": "203.0.113.0/28"}]})
    assert check(gpu_lb_private_only, [kube(pool, "site-a-gpu", gpu=True)]) == [
        "CiliumLoadBalancerIPPool external on site-a-gpu has the public block 203.0.113.0/28; GPU clusters use RFC1918 addresses only"
    ]


def test_fails_when_a_gpu_cluster_peers_publicly():
    config = k8s("CiliumBGPClusterConfig", "fab-bgp", api="cilium.io/v2", spec={"bgpInstances": [{"name": "i", "peers": [
        {"name": "edge", "peerAddress": "10.10.3.254", "peerConfigRef": {"name": "fab-public"}}]}]})
    assert check(gpu_lb_private_only, [kube(config, "site-a-gpu", gpu=True)]) == [
        "CiliumBGPClusterConfig fab-bgp on site-a-gpu peers with edge (10.10.3.254) as a public peer; GPU clusters peer only with private ToRs"
    ]


def test_public_addresses_on_compute_are_not_this_rules_concern():
    assert check(gpu_lb_private_only, [kube(lb_service("203.0.113.10"), "site-a-compute")]) == []


# fab-gateway-local-traffic -----------------------------------------------------------------

def envoy_proxy(policy: str | None) -> dict:
    service = {"type": "LoadBalancer", **({"externalTrafficPolicy": policy} if policy else {})}
    return k8s("EnvoyProxy", "llm", "envoy-gateway-system", api="gateway.envoyproxy.io/v1alpha1",
               spec={"provider": {"type": "Kubernetes", "kubernetes": {"envoyService": service}}})


def test_local_gateway_traffic_passes():
    assert check(gateway_local_traffic, kube(envoy_proxy("Local"), "site-a-gpu")) == []


def test_fails_when_the_gateway_uses_cluster_traffic_policy():
    assert check(gateway_local_traffic, kube(envoy_proxy("Cluster"), "site-a-gpu")) == [
        "EnvoyProxy llm: the gateway Service must use externalTrafficPolicy Local (got 'Cluster') so that flow rules see the caller's address"
    ]


# fab-routes-authenticated ------------------------------------------------------------------

ROUTE = k8s("HTTPRoute", "vllm-a", "inference", api="gateway.networking.k8s.io/v1", spec={"rules": []})


def route_policy(kind: str, body: dict) -> dict:
    return k8s(kind, "vllm-a", "inference", api="gateway.envoyproxy.io/v1alpha1",
               spec={"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "vllm-a"}], **body})


JWT = route_policy("SecurityPolicy", {"jwt": {"providers": [{"name": "keycloak"}]}})
LIMIT = route_policy("BackendTrafficPolicy", {"rateLimit": {"local": {"rules": []}}})


def test_routes_with_jwt_and_rate_limit_pass():
    assert check(routes_authenticated, [kube(o, "site-a-gpu", gpu=True) for o in (ROUTE, JWT, LIMIT)]) == []


def test_fails_when_a_route_has_no_jwt_policy():
    assert check(routes_authenticated, [kube(o, "site-a-gpu", gpu=True) for o in (ROUTE, LIMIT)]) == [
        "HTTPRoute inference/vllm-a on site-a-gpu has no JWT SecurityPolicy"
    ]


def test_fails_when_a_route_has_no_rate_limit():
    assert check(routes_authenticated, [kube(o, "site-a-gpu", gpu=True) for o in (ROUTE, JWT)]) == [
        "HTTPRoute inference/vllm-a on site-a-gpu has no rate limit (BackendTrafficPolicy)"
    ]


# fab-cross-cluster-default-deny -------------------------------------------------------------

DENY = k8s("CiliumClusterwideNetworkPolicy", "fab-default-deny-remote", api="cilium.io/v2", labels={"fab.internal/rule": "default-deny"},
           spec={"endpointSelector": {}, "ingress": [{"fromEntities": ["host"]}]})


def flow_rule(port: str) -> dict:
    return k8s("CiliumClusterwideNetworkPolicy", "fab-flow-x", api="cilium.io/v2", labels={"fab.internal/rule": "flow"},
               spec={"endpointSelector": {}, "ingress": [{"toPorts": [{"ports": [{"port": port, "protocol": "TCP"}]}]}]})


CLUSTER = resource("pulumi:providers:kubernetes", {}, name="site-a-storage")


def test_a_cluster_with_default_deny_and_approved_ports_passes():
    assert check(cross_cluster_default_deny, [CLUSTER, kube(DENY, "site-a-storage"), kube(flow_rule("9000"), "site-a-storage")]) == []


def test_fails_when_a_cluster_has_no_default_deny():
    assert check(cross_cluster_default_deny, [CLUSTER]) == [
        "cluster site-a-storage has no default-deny rule for remote clusters (a CiliumClusterwideNetworkPolicy labelled "
        "fab.internal/rule=default-deny selecting every endpoint)"
    ]


def test_fails_when_an_allow_rule_opens_an_unapproved_port():
    assert check(cross_cluster_default_deny, [CLUSTER, kube(DENY, "site-a-storage"), kube(flow_rule("5432"), "site-a-storage")]) == [
        "CiliumClusterwideNetworkPolicy fab-flow-x on site-a-storage allows port 5432, which is not an approved cross-cluster "
        "port (53, 2379, 6443, 8181, 9000, 10443)"
    ]


def test_approved_ports_are_configurable():
    config = {"approvedPorts": [5432]}
    assert check(cross_cluster_default_deny, [CLUSTER, kube(DENY, "site-a-storage"), kube(flow_rule("5432"), "site-a-storage")], config) == []


# fab-host-network-allow-listed --------------------------------------------------------------

def test_host_network_in_an_allowed_namespace_passes():
    daemon = pod("Deployment", "driver", "gpu-operator", SAFE, hostNetwork=True)
    assert check(host_network_allow_listed, kube(daemon)) == []


def test_fails_when_host_network_is_used_outside_the_allow_list():
    assert check(host_network_allow_listed, kube(pod("Deployment", "app", "team-yield", SAFE, hostNetwork=True))) == [
        "Deployment team-yield/app uses the host's namespaces outside the allow-list"
    ]


def test_fails_when_a_container_is_privileged_outside_the_allow_list():
    container = {**SAFE, "securityContext": {**SAFE["securityContext"], "privileged": True}}
    assert check(host_network_allow_listed, kube(pod("Deployment", "app", "team-yield", container))) == [
        "container app of Deployment team-yield/app is privileged outside the allow-list"
    ]


def test_fails_when_a_namespace_is_privileged_outside_the_allow_list():
    ns = k8s("Namespace", "scratch", labels={"pod-security.kubernetes.io/enforce": "privileged"})
    assert check(host_network_allow_listed, kube(ns)) == [
        "namespace scratch is privileged but not in the host-access allow-list (kube-system, gpu-operator, nvidia-network-operator)"
    ]


# fab-single-catalog-authority -----------------------------------------------------------------

def iam_policy(statements: list[dict]) -> dict:
    return {"name": "fab-spark", "policy": json.dumps({"Version": "2012-10-17", "Statement": statements})}


ALLOW_READ = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::site-a-gold/*"]}
DENY_TABLES = {"Effect": "Deny", "Action": ["s3tables:*"], "Resource": ["arn:aws:s3tables:::bucket/site-a-gold"]}


def test_polaris_only_passes():
    trino = resource("kubernetes:helm.sh/v3:Release", {"values": {"catalogs": {"fab": "iceberg.catalog.type=rest\n"}}}, "trino")
    assert check(single_catalog_authority, [trino, resource("minio:index/iamPolicy:IamPolicy", iam_policy([ALLOW_READ, DENY_TABLES]))]) == []


def test_fails_when_a_chart_configures_a_hive_catalog():
    trino = resource("kubernetes:helm.sh/v3:Release", {"values": {"catalogs": {"hive": "hive.metastore.uri=thrift://x:9083\n"}}}, "trino")
    assert check(single_catalog_authority, [trino]) == [
        "Helm release trino configures an Iceberg catalog other than Polaris's REST catalog"
    ]


def test_fails_when_a_policy_leaves_the_object_stores_table_catalog_reachable():
    assert check(single_catalog_authority, [resource("minio:index/iamPolicy:IamPolicy", iam_policy([ALLOW_READ]))]) == [
        "MinIO policy fab-spark does not deny s3tables:*: the object store's own table catalog must stay unreachable, "
        "Polaris is the only catalog"
    ]


def test_fails_when_a_config_map_configures_a_glue_catalog():
    config = k8s("ConfigMap", "spark-defaults", "spark", data={"spark-defaults.conf": "iceberg.catalog.type=glue\n"})
    assert check(single_catalog_authority, [kube(config)]) == [
        "ConfigMap spark/spark-defaults configures an Iceberg catalog other than Polaris"
    ]


# fab-bucket-least-privilege -----------------------------------------------------------------

def test_named_buckets_and_actions_pass():
    assert check(bucket_least_privilege, resource("minio:index/iamPolicy:IamPolicy", iam_policy([ALLOW_READ]))) == []


def test_fails_when_a_policy_grants_s3_star():
    statement = {**ALLOW_READ, "Action": ["s3:*"]}
    assert check(bucket_least_privilege, resource("minio:index/iamPolicy:IamPolicy", iam_policy([statement]))) == [
        "policy fab-spark grants 's3:*'; grant the actions the engine needs"
    ]


def test_fails_when_a_policy_grants_a_wildcard_bucket():
    statement = {**ALLOW_READ, "Resource": ["arn:aws:s3:::*"]}
    assert check(bucket_least_privilege, resource("minio:index/iamPolicy:IamPolicy", iam_policy([statement]))) == [
        "policy fab-spark grants the wildcard resource 'arn:aws:s3:::*'; name the buckets"
    ]


# fab-stateful-protected -------------------------------------------------------------------

def test_a_protected_bucket_passes():
    assert check(stateful_protected, resource("minio:index/s3Bucket:S3Bucket", {"bucket": "b"}, "bucket-b", protect=True)) == []


def test_fails_when_a_bucket_is_not_protected():
    assert check(stateful_protected, resource("minio:index/s3Bucket:S3Bucket", {"bucket": "b"}, "bucket-b")) == [
        "S3Bucket bucket-b holds data and must be protected (and retained on delete)"
    ]


def test_fails_when_a_postgres_cluster_is_not_protected():
    cluster = k8s("Cluster", "polaris-db", "polaris", api="postgresql.cnpg.io/v1", spec={"instances": 3})
    assert check(stateful_protected, kube(cluster, "site-a-storage")) == [
        "Cluster polaris-db holds data and must be protected (and retained on delete)"
    ]


# fab-versioned-artifacts -------------------------------------------------------------------

def bucket_set(versioned: bool) -> list:
    out = [
        resource("minio:index/s3Bucket:S3Bucket", {"bucket": "site-a-models"}, "bucket-models", protect=True),
        resource("pulumi-python:dynamic/storage:BucketTags", {"bucket": "site-a-models", "tags": {"fab.internal/class": "models",
                 "fab.internal/residency": "site-local"}}, "tags-models"),
    ]
    if versioned:
        out.append(resource("minio:index/s3BucketVersioning:S3BucketVersioning",
                            {"bucket": "site-a-models", "versioningConfiguration": {"status": "Enabled"}}, "versioning-models"))
    return out


def test_a_versioned_models_bucket_passes():
    assert check(versioned_artifacts, bucket_set(True)) == []


def test_fails_when_a_models_bucket_is_not_versioned():
    assert check(versioned_artifacts, bucket_set(False)) == ["bucket site-a-models holds models and must be versioned"]


# fab-residency -----------------------------------------------------------------------------

def tags(data_class: str, residency_: str) -> object:
    return resource("pulumi-python:dynamic/storage:BucketTags", {"bucket": f"b-{data_class}", "tags": {
        "fab.internal/class": data_class, "fab.internal/residency": residency_}}, f"tags-{data_class}")


def test_replicable_gold_passes():
    assert check(residency, [tags("gold", "replicable"), tags("raw", "site-local")]) == []


def test_fails_when_raw_data_is_marked_replicable():
    assert check(residency, [tags("raw", "replicable")]) == [
        "bucket b-raw of class raw is marked 'replicable'; only gold may leave the site"
    ]


def test_fails_when_a_non_gold_bucket_replicates():
    replication = resource("minio:index/s3BucketReplication:S3BucketReplication", {"bucket": "b-raw"}, "repl-raw")
    assert check(residency, [tags("raw", "site-local"), replication]) == [
        "repl-raw replicates bucket b-raw, which is not gold; raw and detailed data stay in their site"
    ]


# fab-multikueue-not-own-worker / fab-multikueue-quota-sum -------------------------------------

def mk_cluster(name: str) -> dict:
    return k8s("MultiKueueCluster", name, api="kueue.x-k8s.io/v1beta2", spec={"clusterSource": {}})


def test_a_manager_dispatching_to_other_clusters_passes():
    assert check(multikueue_not_own_worker, [kube(mk_cluster("gpu"), "site-a-compute")]) == []


def test_fails_when_a_manager_is_its_own_worker():
    assert check(multikueue_not_own_worker, [kube(mk_cluster("compute"), "site-a-compute")]) == [
        "MultiKueueCluster compute on site-a-compute points at its own manager; a manager is never its own worker"
    ]


def queue(gpus: int, flavor: str = "training-h200") -> dict:
    return k8s("ClusterQueue", "team-yield", api="kueue.x-k8s.io/v1beta2", spec={"resourceGroups": [{"flavors": [
        {"name": flavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]})


def test_manager_quotas_equal_to_the_workers_pass():
    stack = [kube(mk_cluster("gpu"), "site-a-compute"), kube(queue(8), "site-a-compute"), kube(queue(8), "site-a-gpu")]
    assert check(multikueue_quota_sum, stack) == []


def test_fails_when_manager_quotas_differ_from_the_workers_sum():
    stack = [kube(mk_cluster("gpu"), "site-a-compute"), kube(queue(16), "site-a-compute"), kube(queue(8), "site-a-gpu")]
    assert check(multikueue_quota_sum, stack) == [
        "manager ClusterQueue team-yield on site-a-compute has GPU quotas {'training-h200': 16}, but its workers' add up to "
        "{'training-h200': 8}"
    ]


# fab-serving-not-preemptible / fab-training-kueue-managed / fab-training-ib-nccl-only -----------

def vllm(priority: str) -> dict:
    obj = pod("Deployment", "vllm-a", "inference", SAFE, priorityClassName=priority)
    obj["metadata"]["labels"] = {"app.kubernetes.io/name": "vllm"}
    return obj


def test_vllm_at_serving_priority_passes():
    assert check(serving_not_preemptible, kube(vllm("fab-serving"), "site-a-gpu")) == []


def test_fails_when_vllm_runs_at_another_priority():
    assert check(serving_not_preemptible, kube(vllm("fab-training"), "site-a-gpu")) == [
        "vLLM Deployment vllm-a must use the PriorityClass fab-serving, got 'fab-training'"
    ]


def test_fails_when_training_uses_the_serving_priority():
    job = pod("Job", "train", "team-yield", SAFE, priorityClassName="fab-serving")
    assert check(serving_not_preemptible, kube(job, "site-a-gpu")) == [
        "training Job train must not use the serving PriorityClass fab-serving"
    ]


def test_a_queued_training_job_passes():
    job = pod("Job", "train", "team-yield", SAFE)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "training"}
    assert check(training_kueue_managed, kube(job, "site-a-gpu")) == []


def test_fails_when_a_training_job_has_no_local_queue():
    assert check(training_kueue_managed, kube(pod("Job", "train", "team-yield", SAFE), "site-a-gpu")) == [
        "Job team-yield/train has no kueue.x-k8s.io/queue-name label; training is admitted by Kueue"
    ]


def ipoib(namespace: str) -> dict:
    return k8s("IPoIBNetwork", "ipoib", api="mellanox.com/v1alpha1", spec={"networkNamespace": namespace})


def test_ipoib_for_inference_passes():
    assert check(training_ib_nccl_only, kube(ipoib("inference"), "site-a-gpu")) == []


def test_fails_when_training_namespaces_get_storage_over_infiniband():
    assert check(training_ib_nccl_only, kube(ipoib("team-yield"), "site-a-gpu")) == [
        "IPoIBNetwork ipoib gives training namespace team-yield storage traffic over InfiniBand; set an IB QoS service level "
        "or keep training storage on the Ethernet bond"
    ]


def test_fails_when_training_nodes_get_ipoib_addresses():
    pool = k8s("IPPool", "ipoib", "nvidia-network-operator", api="nv-ipam.nvidia.com/v1alpha1", spec={"nodeSelector": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "fab.internal/gpu-pool", "operator": "In", "values": ["training"]}]}]}})
    assert check(training_ib_nccl_only, kube(pool, "site-a-gpu")) == [
        "IPPool ipoib hands IPoIB addresses to training nodes; InfiniBand on training nodes is for NCCL only"
    ]


def test_a_qos_service_level_allows_storage_over_infiniband():
    assert check(training_ib_nccl_only, kube(ipoib("team-yield"), "site-a-gpu"), {"storageQosServiceLevel": 3}) == []


# fab-pinned-versions ----------------------------------------------------------------------

def test_exact_chart_versions_and_tagged_images_pass():
    assert check(pinned_versions, resource("kubernetes:helm.sh/v3:Release", {"version": "v1.9.0"}, "eg")) == []
    assert check(pinned_versions, kube(pod("Deployment", "app", "ns", SAFE))) == []


def test_fails_when_a_chart_version_is_a_range():
    assert check(pinned_versions, resource("kubernetes:helm.sh/v3:Release", {"version": "^1.9"}, "eg")) == [
        "Helm release eg must pin an exact chart version, got '^1.9'"
    ]


@pytest.mark.parametrize("image", ["registry.example/app:latest", "registry.example/app"])
def test_fails_when_an_image_is_not_pinned(image):
    assert check(pinned_versions, kube(pod("Deployment", "app", "ns", {**SAFE, "image": image}))) == [
        f"container app of Deployment app uses the unpinned image {image!r}"
    ]


# fab-pod-security --------------------------------------------------------------------------

def test_a_restricted_container_passes():
    assert check(pod_security, kube(pod("Deployment", "app", "team-yield", SAFE))) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"securityContext": {**SAFE["securityContext"], "runAsNonRoot": False}}, "must run as non-root"),
        ({"securityContext": {**SAFE["securityContext"], "allowPrivilegeEscalation": True}}, "must set allowPrivilegeEscalation: false"),
        ({"securityContext": {**SAFE["securityContext"], "readOnlyRootFilesystem": False}}, "must have a read-only root filesystem"),
        ({"resources": {"limits": SAFE["resources"]["limits"]}}, "must set requests for cpu, memory"),
        ({"resources": {"requests": SAFE["resources"]["requests"]}}, "must set limits for cpu, memory"),
    ],
)
def test_fails_when_a_container_is_not_restricted(change, message):
    container = {**copy.deepcopy(SAFE), **change}
    assert check(pod_security, kube(pod("Deployment", "app", "team-yield", container))) == [
        f"container app of Deployment team-yield/app {message}"
    ]


# fab-no-plaintext-secrets -------------------------------------------------------------------

def test_references_to_secrets_pass():
    values = {"envFromSecret": "superset-env", "storage": {"secret": {"awsSecretAccessKey": "AWS_SECRET_ACCESS_KEY"}},
              "catalogs": {"fab": "iceberg.rest-catalog.oauth2.credential=${ENV:POLARIS_CLIENT_ID}:${ENV:POLARIS_CLIENT_SECRET}\n"}}
    assert check(no_plaintext_secrets, resource("kubernetes:helm.sh/v3:Release", {"values": values}, "app")) == []


def test_fails_when_helm_values_hold_a_password():
    values = {"auth": {"password": "Sup3rS3cretValue42"}}
    assert check(no_plaintext_secrets, resource("kubernetes:helm.sh/v3:Release", {"values": values}, "app")) == [
        "Helm release app has a credential-looking value at auth.password; read it from a Secret"
    ]


def test_fails_when_a_config_map_holds_an_access_key():
    config = k8s("ConfigMap", "conf", "spark", data={"core-site.xml": "fs.s3a.access.key AKIAABCDEFGHIJKLMNOP"})
    assert check(no_plaintext_secrets, kube(config)) == [
        "ConfigMap spark/conf has a credential-looking value at core-site.xml; use a Secret"
    ]


def test_secrets_handed_to_a_chart_on_allowed_paths_pass():
    values = {"tls": {"ca": {"key": "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"}}}
    assert check(no_plaintext_secrets, resource("kubernetes:helm.sh/v3:Release", {"values": values}, "cilium")) == []
