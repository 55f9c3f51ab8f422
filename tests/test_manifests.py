"""Every Kubernetes object of both stacks validates strictly against its real schema (DESIGN section 5.2)."""

from __future__ import annotations

import pytest
from schemas import CrdSchemas, chart_crds, has_schema, schema_errors

from components import versions
from fabctl.render import HELM_RELEASE_TYPE


@pytest.fixture(scope="session")
def crds(crd_dir, chart_dir) -> CrdSchemas:
    # ../shared/crds first; the kinds only a pinned chart installs (Envoy Gateway's EnvoyExtensionPolicy) from its package.
    return CrdSchemas(crd_dir, extra=list(chart_crds(chart_dir)))


def test_every_kubernetes_object_validates_strictly(plan, crds):
    errors = {
        f"{cluster}/{obj['kind']}/{obj['metadata']['name']}": errs
        for cluster, obj, _ in plan.manifests()
        if (errs := schema_errors(obj, crds))
    }
    assert plan.manifests(), "the stack renders no Kubernetes object"
    assert errors == {}


def test_every_kind_has_a_schema(plan, crds):
    unvalidated = {(obj["apiVersion"], obj["kind"]) for _, obj, _ in plan.manifests() if not has_schema(obj, crds)}
    assert unvalidated == set()


def test_no_object_uses_a_deprecated_api_version(plan, crds):
    deprecated = sorted(
        f"{obj['apiVersion']} {obj['kind']}"
        for _, obj, _ in plan.manifests()
        if crds.knows(obj["apiVersion"], obj["kind"]) and crds.deprecated(obj["apiVersion"], obj["kind"])
    )
    assert deprecated == []


def test_every_helm_release_is_pinned_to_the_versions_table(plan):
    charts = [c for c in vars(versions).values() if isinstance(c, versions.HelmChart)]
    pinned = {(c.chart, c.version, c.repo) for c in charts} | {(f"{c.repo}/{c.chart}", c.version, None) for c in charts}
    releases = plan.of_type(HELM_RELEASE_TYPE)
    assert releases
    for release in releases:
        inputs = release["inputs"]
        assert (inputs["chart"], inputs["version"], inputs.get("repositoryOpts", {}).get("repo")) in pinned


def test_fails_when_a_custom_resource_has_an_unknown_field(crds):
    pool = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumLoadBalancerIPPool",
        "metadata": {"name": "internal"},
        "spec": {"blocks": [{"cidr": "10.0.0.0/24"}], "serviceSelectr": {}},
    }
    assert schema_errors(pool, crds) == ["spec: Additional properties are not allowed ('serviceSelectr' was unexpected)"]


def test_fails_when_a_builtin_object_has_an_unknown_field(crds):
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labelz": {}}}
    assert schema_errors(namespace, crds) == ["metadata: Additional properties are not allowed ('labelz' was unexpected)"]


def test_fails_when_a_kind_has_no_schema(crds):
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "x"}}
    assert schema_errors(obj, crds) == [
        "<root>: no schema for example.com/v1 Widget: neither a Kubernetes 1.34 kind nor an upstream CRD"
    ]
