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

VERIFIED_VALUES = {
    # Airflow chart 1.2x values.yaml and its docs (production guide; "installing with --wait" names the four job keys).
    "airflow": {
        "executor", "postgresql.enabled", "data.metadataSecretName", "fernetKeySecretName", "apiSecretKeySecretName",
        "jwtSecretName", "env", "volumes", "volumeMounts", "apiServer.apiServerConfig", "apiServer.env", "config.*",
        "migrateDatabaseJob.useHelmHooks", "migrateDatabaseJob.applyCustomEnv", "createUserJob.useHelmHooks",
        "createUserJob.applyCustomEnv",
        # Chart 1.19 moved the default user (admin/admin, role Admin) from webserver.defaultUser to createUserJob.defaultUser.
        "createUserJob.defaultUser.enabled",
        # Every component falls back to the top-level nodeSelector and tolerations (values.yaml, "Select certain nodes
        # for airflow pods"; files/pod-template-file.kubernetes-helm-yaml reads workers.kubernetes, then workers, then
        # these); workers.kubernetes.priorityClassName: chart 1.21.0 release notes (#61961).
        "nodeSelector.*", "tolerations", "workers.kubernetes.priorityClassName",
        # `secret`: [{envName, secretName, secretKey}], environment from Secrets in every Airflow container (values.yaml
        # "Secrets for all airflow containers"; templates/_helpers.yaml custom_airflow_environment): the serving_repo
        # connection, with compute.argocd on.
        "secret",
    },
    # Superset chart values.yaml and README (0.13 to 0.22 line): the worker's count is replicas.replicaCount.
    "superset": {
        "secretEnv.create", "envFromSecret", "envFromSecrets", "postgresql.enabled", "redis.enabled",
        "supersetWorker.replicas.enabled", "supersetWorker.replicas.replicaCount", "supersetCeleryBeat.enabled",
        "runAsUser", "configOverrides.*", "init.createAdmin",
        # templates/deployment.yaml and init-job.yaml read the top-level nodeSelector and tolerations; priorityClassName
        # (superset pods) and init.priorityClassName (the init Job) since #29091 (README values table).
        "nodeSelector.*", "tolerations", "priorityClassName", "init.priorityClassName",
        # templates/deployment.yaml: extraEnv (name -> value) into the web container's env, extraVolumes and
        # extraVolumeMounts into its pod: the site CA and REQUESTS_CA_BUNDLE of the sign-in, while the site has a CA.
        "extraEnv.*", "extraVolumes", "extraVolumeMounts",
    },
}
"""For the charts that cannot be rendered here, the value keys checked by hand against the chart's documentation
(`x.*`: a map the chart passes through). A key outside the list is one nobody has checked, and a chart ignores
keys it does not read: that is how a worker count once went unread and left a release waiting forever."""


def value_paths(values: dict, prefix: str = "") -> set[str]:
    paths = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        paths |= value_paths(value, f"{path}.") if isinstance(value, dict) and value else {path}
    return paths


def unverified(chart: str, values: dict) -> list[str]:
    verified = VERIFIED_VALUES[chart]
    return sorted(p for p in value_paths(values) if p not in verified and not any(
        v.endswith(".*") and p.startswith(v[:-1]) for v in verified))

def test_every_release_renders_with_its_pinned_chart(plan, releases_of):
    done, _ = releases_of(plan.stack)
    assert done, "no release was rendered"
    assert {f"{r.cluster}/{r.release['name']}": r.error for r in done if r.error} == {}


def test_only_the_listed_charts_are_missing(plan, releases_of):
    _, missing = releases_of(plan.stack)
    assert {m.chart for m in missing} <= MISSING_CHARTS


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


def test_every_value_of_a_chart_missing_here_is_a_verified_key(plan):
    releases = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if ChartRef.of(r) in MISSING_CHARTS]
    assert releases, "no release of a chart missing here"
    assert {r["inputs"]["chart"]: unverified(r["inputs"]["chart"], r["inputs"]["values"]) for r in releases} == {
        r["inputs"]["chart"]: [] for r in releases
    }


def test_fails_when_a_value_is_set_at_a_key_the_chart_does_not_read():
    assert unverified("superset", {"supersetWorker": {"replicaCount": 0}}) == ["supersetWorker.replicaCount"]


PULUMI_DEFAULT_TIMEOUT_SEC = 300


def test_every_release_waits_longer_than_pulumis_default_and_keeps_a_bounded_history(plan):
    releases = plan.of_type("kubernetes:helm.sh/v3:Release")
    assert releases
    assert {r["name"]: (r["inputs"].get("timeout"), r["inputs"].get("maxHistory")) for r in releases
            if (r["inputs"].get("timeout") or PULUMI_DEFAULT_TIMEOUT_SEC) <= PULUMI_DEFAULT_TIMEOUT_SEC or not r["inputs"].get("maxHistory")} == {}


def test_airflow_migrates_in_a_plain_job_within_its_timeout(small_plan):
    (airflow,) = [r for r in small_plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "airflow"]
    values = airflow["inputs"]["values"]
    assert (values["migrateDatabaseJob"]["useHelmHooks"], values["createUserJob"]["useHelmHooks"], airflow["inputs"]["timeout"]) == (
        False, False, 1800
    )


def test_a_document_reads_the_same_from_helms_output_and_from_its_chart_file():
    """Helm prints each file of a chart's crds/ folder after a `# Source:` line: the same document, parsed once for the
    release's render and for the names of the CRDs Helm installs first."""
    from fabctl.helm import documents

    printed = "---\n# Source: kueue/crds/a.yaml\napiVersion: v1\nkind: A\n---\n# Source: kueue/templates/b.yaml\nkind: B\n"
    in_chart = "# Copyright the authors\n---\napiVersion: v1\nkind: A\n\n"
    assert (documents(printed), documents(in_chart)) == (["apiVersion: v1\nkind: A", "kind: B"], ["apiVersion: v1\nkind: A"])


def test_a_document_marker_with_content_after_it_is_parsed_as_one_text():
    from fabctl.helm import parse_manifest

    assert [obj["kind"] for obj in parse_manifest("--- {kind: A}\n--- {kind: B}\n")] == ["A", "B"]


# ------------------------------------------------------------------------------------------------------------------
# The ValidatingAdmissionPolicies the releases install, evaluated by a real CEL engine (tests/admission.py).

GATEWAY_SAFE_UPGRADES = "safe-upgrades.gateway.networking.k8s.io"
RELEASE_POLICIES = {GATEWAY_SAFE_UPGRADES: "test_the_gateway_api_safe_upgrade_policy_*"}
"""Each policy a release installs, and the engine tests that evaluate it."""


def release_policies(releases) -> dict[str, tuple[dict, list[dict], list[dict]]]:
    """cluster/release/policy -> (policy, its bindings, the release's objects)."""
    from admission import policies_in

    return {f"{r.cluster}/{r.release['name']}/{name}": (policy, bindings, r.objects)
            for r in releases for name, (policy, bindings) in policies_in(r.objects).items()}


def test_every_policy_a_release_installs_has_engine_tests(plan, releases_of):
    done, _ = releases_of(plan.stack)
    found = release_policies(done)
    assert sorted(key for key in found if key.rsplit("/", 1)[1] not in RELEASE_POLICIES) == [], (
        "a release installs a ValidatingAdmissionPolicy with no engine test: add one (tests/admission.py)")
    assert {key: len(bindings) for key, (_, bindings, _) in found.items()} == {key: 1 for key in found}


def _gateway_policies(plan, releases_of):
    done, _ = releases_of(plan.stack)
    found = [(p, b, objects) for key, (p, (b,), objects) in release_policies(done).items() if key.endswith(GATEWAY_SAFE_UPGRADES)]
    assert found, "no release installs the Gateway API safe-upgrade policy"
    return found


def _gateway_crds(objects) -> list[dict]:
    return [o for o in objects if o["kind"] == "CustomResourceDefinition" and o["spec"]["group"] == "gateway.networking.k8s.io"]


def _annotated(crd: dict, **annotations: str) -> dict:
    return {**crd, "metadata": {**crd["metadata"], "annotations": {
        **crd["metadata"].get("annotations", {}), **{f"gateway.networking.k8s.io/{k.replace('_', '-')}": v for k, v in annotations.items()}}}}


def test_the_gateway_api_safe_upgrade_policy_admits_the_releases_own_crds_created_and_upgraded_over_themselves(plan, releases_of):
    from admission import admit, crd_request

    for policy, binding, objects in _gateway_policies(plan, releases_of):
        crds = _gateway_crds(objects)
        assert crds
        verdicts = {(crd["metadata"]["name"], op): admit(policy, binding, crd_request(op, crd, old, "helm")).allowed
                    for crd in crds for op, old in (("CREATE", None), ("UPDATE", crd))}
        assert verdicts == {key: True for key in verdicts}


def test_the_gateway_api_safe_upgrade_policy_refuses_experimental_crds_over_standard_ones(plan, releases_of):
    from admission import admit, crd_request

    for policy, binding, objects in _gateway_policies(plan, releases_of):
        crd = _annotated(_gateway_crds(objects)[0], channel="experimental")
        decision = admit(policy, binding, crd_request("UPDATE", crd, _annotated(crd, channel="standard"), "helm"))
        assert (decision.allowed, decision.message) == (False, (
            "Installing experimental CRDs on top of standard channel CRDs is prohibited by default. Uninstall "
            "ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install experimental CRDs on top of "
            "standard channel CRDs."))


def test_the_gateway_api_safe_upgrade_policy_refuses_a_downgrade_below_v1_5(plan, releases_of):
    from admission import admit, crd_request

    for policy, binding, objects in _gateway_policies(plan, releases_of):
        old = _gateway_crds(objects)[0]
        for version in ("v1.4.1", "v1.0.0", "v2.0.0"):
            decision = admit(policy, binding, crd_request("UPDATE", _annotated(old, bundle_version=version), old, "helm"))
            assert (decision.allowed, decision.message) == (False, (
                "Installing CRDs with version other than v0.0.0-dev or v1.5+ is prohibited by default. Uninstall "
                "ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install other versions.")), version


def test_the_gateway_api_safe_upgrade_policy_leaves_other_crds_and_kinds_alone(plan, releases_of):
    from admission import Request, admit, crd_request

    for policy, binding, objects in _gateway_policies(plan, releases_of):
        other = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {"group": "kueue.x-k8s.io"}}
        route = Request(operation="CREATE", group="gateway.networking.k8s.io", version="v1", resource="httproutes",
                        kind="HTTPRoute", name="r", namespace="inference", username="tenant", object={"metadata": {}})
        assert [admit(policy, binding, crd_request("CREATE", other, None, "helm")).allowed,
                admit(policy, binding, route).matched] == [True, False]
