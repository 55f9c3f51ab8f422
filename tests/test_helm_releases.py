"""Every Helm release of both stacks, rendered by a real Helm from its pinned chart package, installs valid objects.

Pulumi hands a release's values to Helm on the cluster, where a key the chart does not read is silently
ignored and an object the API server refuses fails the release. Here each release is rendered with
`helm template` (values schema included, the release's post-renderer applied) from the upstream
package at the pinned version, and every object it would install is validated strictly: built-in
kinds with kubernetes-validate, custom resources against ../shared/crds or the CRDs the site's charts install.
"""

from __future__ import annotations

import pytest

from components import versions
from fabctl.helm import ChartPackages, ChartRef, HelmError, template
from fabctl.render import PROJECT_DIR
from schemas import CrdSchemas, schema_errors

MISSING_CHARTS = {
    ChartRef("airflow", versions.AIRFLOW.version, versions.AIRFLOW.repo),
    ChartRef("superset", versions.SUPERSET.version, versions.SUPERSET.repo),
}
"""Pinned charts with no package in ../shared/charts (see its README): their releases cannot be rendered here."""

def test_every_release_renders_with_its_pinned_chart(plan, releases_of):
    done, _ = releases_of(plan.stack)
    assert done, "no release was rendered"
    assert {f"{r.cluster}/{r.release['name']}": r.error for r in done if r.error} == {}


def test_only_the_listed_charts_are_missing(plan, releases_of):
    _, missing = releases_of(plan.stack)
    assert set(missing) <= MISSING_CHARTS


def test_the_listed_missing_charts_are_really_missing(chart_dir):
    packages = ChartPackages(chart_dir)
    assert [str(c) for c in MISSING_CHARTS if packages.find(c) is not None] == []


def test_every_object_a_release_installs_validates_strictly(plan, releases_of, crd_dir):
    done, _ = releases_of(plan.stack)
    objects = [(r, obj) for r in done for obj in r.objects]
    crds = CrdSchemas(crd_dir, extra=[obj for _, obj in objects if obj["kind"] == "CustomResourceDefinition"])
    errors = {
        f"{r.cluster}/{r.release['name']}/{obj['kind']}/{obj['metadata'].get('name')}": errs
        for r, obj in objects
        if (errs := schema_errors(obj, crds))
    }
    assert objects, "the releases install no object"
    assert errors == {}


def test_fails_when_a_value_is_one_the_chart_refuses(chart_dir, helm):
    release = {
        "name": "compute-jupyterhub",
        "inputs": {"name": "jupyterhub", "chart": "jupyterhub", "version": versions.JUPYTERHUB.version, "namespace": "jupyterhub",
                   "repositoryOpts": {"repo": versions.JUPYTERHUB.repo}, "values": {"hub": {"replicaCount": 2}}},
    }
    package = ChartPackages(chart_dir).find(ChartRef.of(release))
    with pytest.raises(HelmError, match="additional properties 'replicaCount' not allowed"):
        template(release, package, helm, PROJECT_DIR)
