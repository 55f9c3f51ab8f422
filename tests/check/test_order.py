"""fabctl check, order: every custom resource after its CRD, every namespaced object after its namespace."""

from __future__ import annotations

import pytest

from components.config import parse_site
from small_site import add_weights_over_ib, small_site

_IB: list = []


@pytest.fixture
def ib(chart_dir, helm):
    """The smallest site loading weights over InfiniBand (so with its IPoIB pool), a fresh copy per test."""
    from check_helpers import deploy_of

    if not _IB:
        raw = small_site()
        add_weights_over_ib(raw)
        _IB.append(deploy_of(raw, chart_dir, helm))
    return _IB[0].copy()


def test_the_smallest_site_deploys_in_order(small):
    assert small.plan.resources
    assert small.lines("order.crd") + small.lines("order.namespace") == []


def test_fails_when_a_custom_resource_does_not_wait_for_the_chart_that_installs_its_crd(small):
    small.drop_dependency("gpu-gpu-node-pools", "gpu-gpu-gpu-operator")
    assert small.lines("order.crd") == [
        "error [order.crd] site-t-gpu NodeFeatureRule fab-gpu-pools (gpu-gpu-node-pools): its CRD (nfd.k8s-sigs.io/NodeFeatureRule) "
        "is installed by gpu-gpu-gpu-operator (Helm release gpu-operator), which is not created before it. "
        "Fix: make gpu-gpu-node-pools depend on gpu-gpu-gpu-operator"
    ]


def test_fails_when_the_ipoib_pool_is_created_before_the_network_operator_registers_its_crd(ib):
    ib.drop_dependency("gpu-gpu-ipoib-pool", "gpu-gpu-nic-cluster-policy")
    assert ib.lines("order.crd") == [
        "error [order.crd] site-t-gpu IPPool nvidia-network-operator/ipoib-weights (gpu-gpu-ipoib-pool): its CRD "
        "(nv-ipam.nvidia.com/IPPool) is registered at run time by the Network Operator, which applies the nv-ipam CRDs when it "
        "reconciles a NicClusterPolicy with nvIpam (state state-nv-ipam-cni), and nothing it waits for ensures that has happened. "
        "Fix: make it depend on a NicClusterPolicy with spec.nvIpam that Pulumi waits for until state-nv-ipam-cni is ready "
        "(annotation pulumi.com/waitFor)"
    ]


def test_fails_when_the_nic_cluster_policy_is_not_awaited_until_nv_ipam_is_ready(ib):
    (policy,) = ib.plan.objects("NicClusterPolicy", "site-t-gpu")
    del policy["metadata"]["annotations"]["pulumi.com/waitFor"]
    assert [f.subject for f in ib.findings("order.crd")] == ["IPPool nvidia-network-operator/ipoib-weights"]


def test_fails_when_a_cilium_object_does_not_wait_for_the_cilium_release(small):
    small.drop_dependency("network-gpu-pool-internal", "network-gpu-cilium")
    assert [f.line().split(": ", 1)[1] for f in small.findings("order.crd")] == [
        "its CRD (cilium.io/CiliumLoadBalancerIPPool) is registered at run time by Cilium's operator, which registers the "
        "cilium.io CRDs when it starts (the Cilium release waits for it), and nothing it waits for ensures that has happened. "
        "Fix: make it depend on the cluster's Cilium Helm release (without skipAwait)"
    ]


def test_cilium_objects_need_no_release_where_cilium_is_installed_by_other_means(chart_dir, helm):
    from check_helpers import deploy_of

    raw = small_site()
    raw["clusters"]["storage"]["cilium"] = {"managed": False}
    raw["adopt"] = {}
    deploy = deploy_of(raw, chart_dir, helm)
    assert deploy.plan.objects("CiliumLoadBalancerIPPool", "site-t-storage")
    assert deploy.lines("order.crd") == []


def _rule_of_unknown_group(small) -> None:
    """The pool rule moved to an API group that nothing installs."""
    (rule,) = small.plan.objects("NodeFeatureRule", "site-t-gpu")
    rule["apiVersion"] = "example.com/v1"


def _existing_on_gpu(small, *subjects: str) -> None:
    raw = small_site()
    raw["check"] = {"existing": {"gpu": list(subjects)}}
    small.site = parse_site(raw)


def test_fails_when_nothing_installs_a_crd(small):
    _rule_of_unknown_group(small)
    # Without its CRD the kind's scope is unknown: it is taken as namespaced, in the provider's default namespace.
    assert small.lines("order.crd") == [
        "error [order.crd] site-t-gpu NodeFeatureRule default/fab-gpu-pools (gpu-gpu-node-pools): nothing installs its CRD "
        "(example.com/NodeFeatureRule) on site-t-gpu. Fix: install the chart or CRD that defines example.com/NodeFeatureRule "
        "before it, or declare the CRD in check.existing.gpu if the cluster has it already"
    ]


def test_a_crd_declared_existing_in_config_is_enough(small):
    _rule_of_unknown_group(small)
    _existing_on_gpu(small, "CustomResourceDefinition nodefeaturerules.example.com")
    assert small.lines("order.crd") == []


def test_fails_when_the_crd_does_not_serve_the_version(small):
    (rule,) = small.plan.objects("NodeFeatureRule", "site-t-gpu")
    rule["apiVersion"] = "nfd.k8s-sigs.io/v1beta9"
    assert small.lines("order.crd") == [
        "error [order.crd] site-t-gpu NodeFeatureRule fab-gpu-pools (gpu-gpu-node-pools): its CRD does not serve "
        "nfd.k8s-sigs.io/v1beta9. Fix: use a version the pinned CRD serves (components/versions.py)"
    ]


def test_fails_when_an_object_does_not_wait_for_its_namespace(small):
    small.drop_dependency("storage-secret-polaris-token-broker", "storage-ns-polaris")
    assert small.lines("order.namespace") == [
        "error [order.namespace] site-t-storage Secret polaris/polaris-token-broker (storage-secret-polaris-token-broker): "
        "it does not wait for its namespace polaris. Fix: make storage-secret-polaris-token-broker depend on storage-ns-polaris"
    ]


def test_fails_when_a_release_does_not_wait_for_its_namespace(small):
    small.resource("storage-polaris")["dependencies"] = []  # it waited for the namespace through its bootstrap Job
    chart_objects = [f for f in small.findings("order.namespace") if f.origin == "storage-polaris (Helm release polaris)"]
    assert chart_objects
    assert {f.problem for f in chart_objects} == {"it does not wait for its namespace polaris"}


def test_fails_when_nothing_creates_a_namespace(small):
    (secret,) = [o for o in small.plan.objects("Secret", "site-t-storage") if o["metadata"]["name"] == "polaris-token-broker"]
    secret["metadata"]["namespace"] = "polaris-typo"
    assert small.lines("order.namespace") == [
        "error [order.namespace] site-t-storage Secret polaris-typo/polaris-token-broker (storage-secret-polaris-token-broker): "
        "nothing creates its namespace polaris-typo. Fix: create the namespace in the program, or declare it in "
        "check.existing.storage"
    ]


def test_fails_when_a_custom_resource_needs_a_crd_its_own_release_installs_among_its_templates(small):
    release = small.release("kueue", "site-t-gpu")
    crds = [o for o in release.objects if o["kind"] == "CustomResourceDefinition"]
    assert crds and not any(release.installs_first(o) for o in crds)
    release.objects.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}})
    assert [f.problem for f in small.findings("order.crd")] == [
        "its CRD (kueue.x-k8s.io/ResourceFlavor) is installed by training-gpu-kueue (Helm release kueue), which is not "
        "created before it"
    ]


def test_crds_of_a_charts_crds_folder_come_first_in_its_release(small):
    release = small.release("gpu-operator", "site-t-gpu")
    assert "clusterpolicies.nvidia.com" in {o["metadata"]["name"] for o in release.objects if release.installs_first(o)}


def test_fails_when_a_release_does_not_wait_for_its_own_namespace(small):
    small.resource("compute-trino")["dependencies"] = []
    assert [f.line() for f in small.findings("order.namespace") if f.subject.startswith("HelmRelease")] == [
        "error [order.namespace] site-t-compute HelmRelease trino/trino (compute-trino): it does not wait for its namespace "
        "trino. Fix: make compute-trino depend on compute-ns-trino"
    ]


def test_a_crd_declared_existing_must_name_the_kinds_plural_exactly(small):
    _rule_of_unknown_group(small)
    _existing_on_gpu(small, "CustomResourceDefinition nodefeaturerulesets.example.com")
    assert [f.rule for f in small.findings("order.crd")] == ["order.crd"]


def test_cilium_kinds_registered_at_run_time_have_the_scope_of_their_crds(crd_dir):
    import yaml

    from fabctl.check.runtime import RUNTIME_CRDS

    (cilium,) = [entry for entry in RUNTIME_CRDS if entry.group == "cilium.io"]
    crds = [yaml.safe_load(p.read_text()) for p in sorted((crd_dir / "cilium").glob("*.yaml"))]
    assert crds
    known = {c["spec"]["names"]["kind"]: c["spec"]["scope"] for c in crds}
    assert {kind: known[kind] for kind in cilium.cluster_scoped if kind in known} == {
        kind: "Cluster" for kind in cilium.cluster_scoped if kind in known
    }
    assert {kind for kind, scope in known.items() if scope == "Cluster"} <= cilium.cluster_scoped
