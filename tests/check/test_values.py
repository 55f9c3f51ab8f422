"""fabctl check, chart values: every value a release sets is read by its chart (tried with a real Helm)."""

from __future__ import annotations

import tarfile

from fabctl.check import ValuesCheck
from fabctl.check.values import candidates, chart_defaults
from fabctl.helm import ChartRef, RenderedRelease, template
from fabctl.render import PROJECT_DIR


def test_every_value_the_smallest_site_sets_is_read(small, helm):
    assert [f.line() for f in small.report(ValuesCheck(helm, PROJECT_DIR)).findings if f.rule == "charts.values"] == []


def test_fails_when_a_value_is_set_at_a_key_the_chart_does_not_read(small, helm):
    rendered = small.release("gpu-operator", "site-t-gpu")
    worker = rendered.release["inputs"]["values"]["node-feature-discovery"]["worker"]
    worker["toleration"] = worker.pop("tolerations")  # a typo: the worker keeps the chart's default tolerations
    small.releases = [rendered]
    assert [f.line() for f in small.report(ValuesCheck(helm, PROJECT_DIR)).findings if f.rule == "charts.values"] == [
        "error [charts.values] site-t-gpu HelmRelease gpu-operator/gpu-operator (gpu-gpu-gpu-operator): chart gpu-operator "
        "v25.10.1 does not read the value node-feature-discovery.worker.toleration (setting or removing it changes nothing it "
        "installs). Fix: use the key the chart's values.yaml defines for this setting, or remove it"
    ]


def test_keys_outside_the_chart_defaults_are_tried_and_maps_it_passes_through_are_not_descended(small):
    rendered = small.release("jupyterhub", "site-t-compute")
    values = rendered.release["inputs"]["values"]
    found = sorted(".".join(p) for p in candidates(values, chart_defaults(rendered.package)))
    assert found == ["hub.config.GenericOAuthenticator", "hub.config.KubeSpawner"]


def test_a_value_the_chart_writes_into_a_secret_is_read(small, helm):
    rendered = small.release("jupyterhub", "site-t-compute")
    assert ValuesCheck(helm, PROJECT_DIR).unread(rendered) == []


def _chart_release(helm, tmp_path, template_text: str, values: dict) -> RenderedRelease:
    """A release of a one-template chart `flags` whose default values are `a: {other: 1}`, rendered."""
    source = tmp_path / "flags"
    (source / "templates").mkdir(parents=True)
    (source / "Chart.yaml").write_text("apiVersion: v2\nname: flags\nversion: 1.0.0\n")
    (source / "values.yaml").write_text("a: {other: 1}\n")
    (source / "templates" / "cm.yaml").write_text(template_text)
    package = tmp_path / "flags-1.0.0.tgz"
    with tarfile.open(package, "w:gz") as archive:
        archive.add(source, arcname="flags")
    release = {"urn": "urn:flags", "name": "flags", "inputs": {"name": "flags", "namespace": "default", "chart": "flags",
                                                              "version": "1.0.0", "values": values}}
    return RenderedRelease(release, "c", ChartRef("flags", "1.0.0", ""), template(release, package, helm, PROJECT_DIR), None, package)


def test_a_flag_set_to_what_the_chart_assumes_anyway_is_read(helm, tmp_path):
    rendered = _chart_release(
        helm, tmp_path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags}\ndata:\n  on: {{ if .Values.a.flag }}\"yes\"{{ else }}\"no\"{{ end }}\n",
        {"a": {"flag": False, "typo": True}})
    assert ValuesCheck(helm, PROJECT_DIR).unread(rendered) == [("a", "typo")]


def test_keys_tried_together_are_told_apart_however_the_chart_reads_each(helm, tmp_path):
    """Several keys go into one render with a marker each; where the render cannot say which key did what (a flag read
    only for its effect, a value Helm refuses as a marker), the keys are tried apart: the unread ones are the same as
    one key at a time would find, in the order the release sets them."""
    rendered = _chart_release(
        helm, tmp_path,
        "{{ if not (kindIs \"bool\" .Values.a.strict) }}{{ fail \"a.strict must be true or false\" }}{{ end }}\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flags}\ndata:\n  name: {{ .Values.a.name | quote }}\n"
        "  switch: {{ if .Values.a.flag }}\"yes\"{{ else }}\"no\"{{ end }}\n",
        {"a": {"typo": 1, "name": "x", "flag": False, "strict": True, "other2": "y"}, "b": {"c": 1}})
    assert ValuesCheck(helm, PROJECT_DIR).unread(rendered) == [("a", "typo"), ("a", "other2"), ("b",)]


def test_a_release_installed_alike_on_two_clusters_is_tried_once(small, helm, monkeypatch):
    """Same package, name, namespace and values (CloudNativePG's operator on storage and on compute): one set of trials,
    a finding for each."""
    import dataclasses

    from fabctl.check.values import values_findings

    rendered = small.release("gpu-operator", "site-t-gpu")
    small.releases = [rendered, dataclasses.replace(rendered, cluster="site-t-gpu2")]
    tried: list[str] = []
    monkeypatch.setattr(ValuesCheck, "unread", lambda self, release: tried.append(release.cluster) or [("typo",)])
    done: list[str] = []
    findings = list(values_findings(small, ValuesCheck(helm, PROJECT_DIR), done.append))
    assert (tried, len(findings), done) == (["site-t-gpu"], 2, ["site-t-gpu gpu-gpu-gpu-operator",
                                                   "site-t-gpu2 gpu-gpu-gpu-operator"])
