"""Each rule alone: one compliant fixture, then one failing fixture per message, changing a single property."""

from __future__ import annotations

import copy
import json

import pytest
from policy_fixtures import SAFE, check, k8s, kube, pod, resource
from rules import POLICIES
from rules.gpu import gpu_lb_private_only, no_gpu_outside_gpu_clusters, training_kueue_managed
from rules.kueue import multikueue_not_own_worker, multikueue_quota_sum
from rules.network import cross_cluster_default_deny, gateway_local_traffic, routes_authenticated
from rules.storage import bucket_least_privilege, residency, stateful_protected, versioned_artifacts
from rules.workloads import no_plaintext_secrets, pinned_versions, pod_security


def test_every_rule_has_a_fab_id_and_a_description():
    assert all(p.name.startswith("fab-") and p.description.endswith(".") for p in POLICIES)
    assert len({p.name for p in POLICIES}) == len(POLICIES)


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


CLUSTER = resource("pulumi:providers:kubernetes", {}, name="site-a-storage")


def test_a_cluster_with_default_deny_passes():
    assert check(cross_cluster_default_deny, [CLUSTER, kube(DENY, "site-a-storage")]) == []


def test_fails_when_a_cluster_has_no_default_deny():
    assert check(cross_cluster_default_deny, [CLUSTER]) == [
        "cluster site-a-storage has no default-deny rule for remote clusters (a CiliumClusterwideNetworkPolicy labelled "
        "fab.internal/rule=default-deny selecting every endpoint)"
    ]


def test_fails_when_the_default_deny_selects_only_some_endpoints():
    narrow = copy.deepcopy(DENY)
    narrow["spec"]["endpointSelector"] = {"matchLabels": {"app": "spark"}}
    assert check(cross_cluster_default_deny, [CLUSTER, kube(narrow, "site-a-storage")]) == [
        "cluster site-a-storage has no default-deny rule for remote clusters (a CiliumClusterwideNetworkPolicy labelled "
        "fab.internal/rule=default-deny selecting every endpoint)"
    ]


# fab-host-network-allow-listed, fab-privileged-allow-listed, fab-privileged-namespace-allow-listed: tests/policies/test_host_access.py


# fab-bucket-least-privilege -----------------------------------------------------------------

def iam_policy(statements: list[dict]) -> dict:
    return {"name": "fab-spark", "policy": json.dumps({"Version": "2012-10-17", "Statement": statements})}


ALLOW_READ = {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::site-a-gold/*"]}


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
        "S3Bucket bucket-b holds data but has protect: false; resources that hold data are protected (and retained on delete)"
    ]


def test_fails_when_a_postgres_cluster_is_not_protected():
    cluster = k8s("Cluster", "polaris-db", "polaris", api="postgresql.cnpg.io/v1", spec={"instances": 3})
    assert check(stateful_protected, kube(cluster, "site-a-storage")) == [
        ("Cluster polaris-db on site-a-storage holds data but has protect: false; resources that hold data are protected "
         "(and retained on delete)")
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
        "manager ClusterQueue team-yield on site-a-compute has the nominalQuota 16 of nvidia.com/gpu in flavor training-h200, "
        "but its workers (gpu) add up to 8; a manager's quota is the sum of its workers'"
    ]


# fab-training-kueue-managed / fab-training-ib-nccl-only (the priority rules: test_kueue.py) ---------

def test_a_queued_training_job_passes():
    job = pod("Job", "train", "team-yield", SAFE)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "training"}
    assert check(training_kueue_managed, kube(job, "site-a-gpu")) == []


def test_fails_when_a_training_job_has_no_local_queue():
    assert check(training_kueue_managed, kube(pod("Job", "train", "team-yield", SAFE), "site-a-gpu")) == [
        "Job team-yield/train has no kueue.x-k8s.io/queue-name label; training is admitted by Kueue"
    ]


# fab-training-ib-nccl-only and the other InfiniBand rules: tests/policies/test_infiniband.py


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
