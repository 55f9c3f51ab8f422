"""Argo CD on compute applying the serving repository to the serving cluster (issue 18): the smallest site with
serving through Git (small_site.with_argocd), its objects, and the chart rendered with the program's values."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import render_small
from schemas import CrdSchemas, _adapt, schema_errors
from small_site import SERVING_REPO, SERVING_REPO_TOKEN, small_site, with_argocd

from components.config import parse_site
from components.engines.argocd import cluster_config, repo_path, repository_data
from fabctl.helm import ChartPackages, render_releases
from fabctl.render import PROJECT_DIR, Plan, RenderError

COMPUTE, GPU = "site-t-compute", "site-t-gpu"
SERVER = "https://10.30.3.10:6443"
"""The small site's gpu cluster API server (small_site.cluster_entry), Argo CD's destination."""
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"


def render_argocd(site: dict[str, Any]) -> Plan:
    return render_small(site, secrets=SERVING_REPO_TOKEN)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return render_argocd(with_argocd(small_site()))


def record(plan: Plan, name: str) -> dict[str, Any]:
    (found,) = [r for r in plan.resources if r["name"] == name]
    return found


def one(plan: Plan, kind: str, cluster: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in plan.objects(kind, cluster) if o["metadata"]["name"] == name]
    return found


def values(plan: Plan) -> dict[str, Any]:
    return record(plan, "compute-argocd")["inputs"]["values"]


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


# The Application and its project ------------------------------------------------------------------------------------


def test_the_application_keeps_the_serving_clusters_directory_applied(plan):
    app = one(plan, "Application", COMPUTE, "serving-gpu")
    assert (app["metadata"]["namespace"], app["spec"]) == ("argocd", {
        "project": "serving",
        "source": {"repoURL": SERVING_REPO, "targetRevision": "main", "path": "sites/site-t/gpu", "directory": {"recurse": True}},
        "destination": {"server": SERVER, "namespace": "inference"},
        "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                       "syncOptions": ["PruneLast=true", "ServerSideApply=true", "ApplyOutOfSyncOnly=true"]},
    })


def test_the_application_has_no_finalizer_that_would_delete_the_models_with_it(plan):
    assert "finalizers" not in one(plan, "Application", COMPUTE, "serving-gpu")["metadata"]


def test_the_application_reads_the_configured_revision_and_path():
    site = with_argocd(small_site())
    site["compute"]["argocd"]["serving_repo"].update(revision="release-3", path="fab/a/")
    app = one(render_argocd(site), "Application", COMPUTE, "serving-gpu")
    assert (app["spec"]["source"]["targetRevision"], app["spec"]["source"]["path"]) == ("release-3", "fab/a/gpu")


def test_a_cluster_reads_its_directory_under_the_site_by_default():
    assert repo_path(None, "site-a", "gpu") == "sites/site-a/gpu"


def test_the_project_admits_exactly_the_repository_the_serving_namespace_and_the_serving_kinds(plan):
    project = one(plan, "AppProject", COMPUTE, "serving")
    assert project["spec"] == {
        "description": "The serving objects of every model, from the serving repository (fabctl serving render).",
        "sourceRepos": [SERVING_REPO],
        "destinations": [{"server": SERVER, "namespace": "inference"}],
        "clusterResourceWhitelist": [],
        "namespaceResourceWhitelist": [
            {"group": "apps", "kind": "Deployment"}, {"group": "", "kind": "Service"},
            {"group": "policy", "kind": "PodDisruptionBudget"}, {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
        ],
    }


def test_the_custom_resources_wait_for_the_chart_that_installs_their_crds(plan):
    release = record(plan, "compute-argocd")["urn"]
    assert {name: release in record(plan, name)["dependencies"] for name in ("compute-argocd-project-serving", "compute-argocd-app-gpu")} == {
        "compute-argocd-project-serving": True, "compute-argocd-app-gpu": True,
    }


def test_every_object_of_serving_through_git_validates_strictly(plan, crd_dir):
    crds = CrdSchemas(crd_dir)
    ours = [(c, o) for c, o, _ in plan.manifests() if o["metadata"].get("namespace") == "argocd" or "argocd" in o["metadata"]["name"]]
    assert {o["kind"] for _, o in ours} >= {"Application", "AppProject", "Secret", "Role", "RoleBinding", "ServiceAccount",
                                            "HTTPRoute", "CiliumClusterwideNetworkPolicy"}
    assert {f"{c}/{o['kind']}/{o['metadata']['name']}": e for c, o in ours if (e := schema_errors(o, crds))} == {}


def test_the_custom_resources_validate_against_the_crds_the_pinned_chart_installs(plan, installed):
    """The chart ships Argo CD v3.4.4's CRDs, ../shared/crds v3.5.1's (versions.ARGO_CD): both must accept them."""
    schemas = {crd["spec"]["names"]["kind"]: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
               for crd in installed if crd["kind"] == "CustomResourceDefinition"}
    errors = {kind: [e.message for e in jsonschema.Draft4Validator(_adapt(json.loads(json.dumps(schemas[kind])))).iter_errors(obj)]
              for kind in ("Application", "AppProject") for obj in plan.objects(kind, COMPUTE)}
    assert errors == {"Application": [], "AppProject": []}


# Its sources and destinations: Secrets -------------------------------------------------------------------------------


def test_the_repository_is_a_declared_source(plan):
    secret = one(plan, "Secret", COMPUTE, "repo-serving")
    assert (secret["metadata"]["namespace"], secret["metadata"]["labels"]) == ("argocd", {"argocd.argoproj.io/secret-type": "repository"})
    assert secret["stringData"] == {"type": "[secret]", "url": "[secret]", "username": "[secret]", "password": "[secret]"}


def test_the_repository_is_read_over_https_with_the_configured_user_and_the_token():
    repo = parse_site(with_argocd(small_site())).compute.argocd.serving_repo
    assert repository_data(repo, "t0ken") == {"type": "git", "url": SERVING_REPO, "username": "git", "password": "t0ken"}


def test_the_serving_cluster_is_a_destination_limited_to_the_serving_namespace(plan):
    secret = one(plan, "Secret", COMPUTE, "cluster-gpu")
    assert (secret["metadata"]["namespace"], secret["metadata"]["labels"]) == ("argocd", {"argocd.argoproj.io/secret-type": "cluster"})
    assert secret["stringData"] == dict.fromkeys(("name", "server", "namespaces", "clusterResources", "config"), "[secret]")
    assert record(plan, "inference-token-argocd-serving")["urn"] in record(plan, "compute-argocd-cluster-gpu")["dependencies"]


def test_the_cluster_config_is_the_serving_accounts_token_and_the_clusters_ca():
    data = {"token": base64.b64encode(b"eyJhbGciOi.token").decode(), "ca.crt": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()}
    assert json.loads(cluster_config(data)) == {
        "bearerToken": "eyJhbGciOi.token",
        "tlsClientConfig": {"insecure": False, "caData": base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()},
    }


def test_the_oidc_secret_is_one_argo_cd_resolves_references_from(plan):
    assert one(plan, "Secret", COMPUTE, "argocd-oidc")["metadata"]["labels"] == {"app.kubernetes.io/part-of": "argocd"}


def test_fails_when_the_repository_token_is_not_set():
    with pytest.raises(RenderError) as info:
        render_small(with_argocd(small_site()))
    assert str(info.value).splitlines() == [
        ("fab-platform:servingRepoToken: required because compute.argocd.enabled is true with a serving_repo; set it with: "
         "pulumi config set --secret servingRepoToken <value>")
    ]


# The serving cluster's account ------------------------------------------------------------------------------------------


def test_the_serving_account_may_change_only_the_serving_kinds_and_read_what_they_make(plan):
    role = one(plan, "Role", GPU, "argocd-serving")
    write = ["get", "list", "watch", "create", "update", "patch", "delete"]
    assert (role["metadata"]["namespace"], role["rules"]) == ("inference", [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": write},
        {"apiGroups": [""], "resources": ["services"], "verbs": write},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": write},
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["httproutes"], "verbs": write},
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    ])


def test_the_role_is_bound_to_the_serving_account_only(plan):
    binding = one(plan, "RoleBinding", GPU, "argocd-serving")
    assert (binding["roleRef"], binding["subjects"]) == (
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argocd-serving"},
        [{"kind": "ServiceAccount", "name": "argocd-serving", "namespace": "inference"}],
    )


def test_the_serving_accounts_token_is_a_secret_output(plan):
    token = record(plan, "inference-token-argocd-serving")
    assert (token["inputs"]["type"], token["inputs"]["metadata"]["annotations"]) == (
        "kubernetes.io/service-account-token", {"kubernetes.io/service-account.name": "argocd-serving"})
    assert "data" in token["additional_secret_outputs"]


def test_nothing_is_given_to_argo_cd_while_pulumi_delivers():
    site = with_argocd(small_site())
    site["inference"]["delivery"] = "pulumi"
    plan = render_argocd(site)
    kinds = {(o["kind"], o["metadata"]["name"]) for c, o, _ in plan.manifests()}
    assert ("Secret", "repo-serving") in kinds
    assert {k for k in kinds if k[1] in ("argocd-serving", "cluster-gpu", "serving", "serving-gpu")} == set()
    assert "argocd" not in parse_site(site).flow_table()


def test_argo_cds_controller_reaches_the_serving_api_server_and_its_own_namespace_only(plan):
    rule = one(plan, "CiliumClusterwideNetworkPolicy", COMPUTE, "fab-flow-argocd")
    assert rule["spec"]["endpointSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "argocd-application-controller", "k8s:io.kubernetes.pod.namespace": "argocd"}
    }
    assert rule["spec"]["egress"][2:] == [
        {"toCIDR": ["10.30.3.10/32"], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]},
        {"toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "argocd", "io.cilium.k8s.policy.cluster": COMPUTE}}]},
    ]


# The chart's values ---------------------------------------------------------------------------------------------------


def test_the_chart_is_the_pinned_one_in_argo_cds_namespace(plan):
    inputs = record(plan, "compute-argocd")["inputs"]
    assert (inputs["chart"], inputs["version"], inputs["repositoryOpts"], inputs["name"], inputs["namespace"]) == (
        "argo-cd", "10.1.1", {"repo": "https://argoproj.github.io/argo-helm"}, "argocd", "argocd")


def test_no_credential_is_in_the_helm_values(plan):
    found = strings(values(plan))
    assert found
    assert [s for s in found if s == "[secret]" or "t0ken" in s] == []
    oidc = yaml.safe_load(values(plan)["configs"]["cm"]["oidc.config"])
    assert (oidc["clientID"], oidc["clientSecret"]) == ("$argocd-oidc:OIDC_CLIENT_ID", "$argocd-oidc:OIDC_CLIENT_SECRET")


def test_sign_in_is_the_realms_only(plan):
    cm = values(plan)["configs"]["cm"]
    assert (cm["url"], cm["admin.enabled"], values(plan)["dex"]) == ("https://argocd.site-t.fab.internal", False, {"enabled": False})
    assert yaml.safe_load(cm["oidc.config"]) == {
        "name": "Keycloak", "issuer": "https://keycloak.site-t.fab.internal/realms/fab",
        "clientID": "$argocd-oidc:OIDC_CLIENT_ID", "clientSecret": "$argocd-oidc:OIDC_CLIENT_SECRET",
        "enablePKCEAuthentication": True, "requestedScopes": ["openid", "profile", "email", "groups"],
    }


def test_teams_read_the_serving_project_and_platform_admins_sync_it():
    plan = render_argocd(with_argocd(small_site(teams=("fdc", "yield"))))
    rbac = values(plan)["configs"]["rbac"]
    assert (rbac["policy.default"], rbac["scopes"]) == ("", "[groups]")
    assert rbac["policy.csv"].splitlines() == [
        "p, role:serving-viewer, applications, get, serving/*, allow",
        "p, role:serving-viewer, projects, get, serving, allow",
        "p, role:serving-admin, applications, get, serving/*, allow",
        "p, role:serving-admin, applications, sync, serving/*, allow",
        "p, role:serving-admin, projects, get, serving, allow",
        "g, team-fdc, role:serving-viewer",
        "g, team-yield, role:serving-viewer",
        "g, platform-admins, role:serving-admin",
    ]


def test_the_controller_watches_only_the_serving_kinds_and_what_they_make(plan):
    cm = values(plan)["configs"]["cm"]
    assert (yaml.safe_load(cm["resource.inclusions"]), cm["resource.exclusions"], cm["cluster.inClusterEnabled"]) == ([
        {"apiGroups": ["apps"], "kinds": ["Deployment", "ReplicaSet"]},
        {"apiGroups": [""], "kinds": ["Service", "Pod"]},
        {"apiGroups": ["policy"], "kinds": ["PodDisruptionBudget"]},
        {"apiGroups": ["gateway.networking.k8s.io"], "kinds": ["HTTPRoute"]},
        {"apiGroups": ["discovery.k8s.io"], "kinds": ["EndpointSlice"]},
    ], "[]", "false")


def test_the_ui_is_behind_the_compute_ingress(plan):
    route = one(plan, "HTTPRoute", COMPUTE, "argocd")
    assert (route["spec"]["hostnames"], route["spec"]["rules"][0]["backendRefs"]) == (
        ["argocd.site-t.fab.internal"], [{"name": "argocd-server", "port": 80}])
    assert values(plan)["configs"]["params"] == {"server.insecure": True}


# The chart rendered with the program's values ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def releases(plan, chart_dir, helm) -> tuple[list[Any], list[Any]]:
    """Every release of the plan as `helm template` renders it with the program's values, and the charts missing here."""
    return render_releases(plan, ChartPackages(chart_dir), helm, PROJECT_DIR)


@pytest.fixture(scope="module")
def installed(releases) -> list[dict[str, Any]]:
    """The objects the Argo CD release installs."""
    (argocd,) = [r for r in releases[0] if r.release["name"] == "compute-argocd"]
    assert argocd.error is None
    return argocd.objects


def pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]["spec"] for o in objects
            if o["kind"] in ("Deployment", "StatefulSet", "Job")}


def test_the_chart_installs_valid_objects(installed, crd_dir):
    crds = CrdSchemas(crd_dir, extra=[o for o in installed if o["kind"] == "CustomResourceDefinition"])
    assert {f"{o['kind']}/{o['metadata']['name']}": e for o in installed if (e := schema_errors(o, crds))} == {}


def test_argo_cd_runs_the_controller_server_repo_server_applicationset_notifications_and_one_redis(installed):
    assert sorted(pods(installed)) == [
        "Deployment/argocd-applicationset-controller", "Deployment/argocd-notifications-controller", "Deployment/argocd-redis",
        "Deployment/argocd-repo-server", "Deployment/argocd-server", "StatefulSet/argocd-application-controller",
    ]


def test_every_argo_cd_pod_runs_in_the_interactive_pool(installed):
    placed = {name: (spec["nodeSelector"].get("fab.internal/compute-pool"), spec["tolerations"], spec["priorityClassName"])
              for name, spec in pods(installed).items()}
    toleration = [{"key": "fab.internal/compute-pool", "operator": "Equal", "value": "interactive", "effect": "NoSchedule"}]
    assert placed == dict.fromkeys(placed, ("interactive", toleration, "compute-interactive"))


def test_every_argo_cd_container_is_restricted_with_requests_and_limits(installed):
    def gaps(spec: dict[str, Any]) -> list[str]:
        found = []
        for c in spec.get("initContainers", []) + spec["containers"]:
            context, pod = c.get("securityContext") or {}, spec.get("securityContext") or {}
            checks = {
                "non-root": context.get("runAsNonRoot") or pod.get("runAsNonRoot"),
                "no escalation": context.get("allowPrivilegeEscalation") is False,
                "read-only root": context.get("readOnlyRootFilesystem") is True,
                "drops ALL": (context.get("capabilities") or {}).get("drop") == ["ALL"],
                "seccomp": context.get("seccompProfile") or pod.get("seccompProfile"),
                "requests and limits": all(r in (c.get("resources") or {}).get(part, {}) for part in ("requests", "limits")
                                           for r in ("cpu", "memory")),
            }
            found += [f"{c['name']}: {what}" for what, ok in checks.items() if not ok]
        return found

    assert {name: gaps(spec) for name, spec in pods(installed).items()} == {name: [] for name in pods(installed)}


def test_the_installed_settings_are_the_programs(installed):
    maps = {o["metadata"]["name"]: o.get("data", {}) for o in installed if o["kind"] == "ConfigMap"}
    assert (maps["argocd-cm"]["url"], maps["argocd-cm"]["admin.enabled"], maps["argocd-cm"]["cluster.inClusterEnabled"]) == (
        "https://argocd.site-t.fab.internal", "false", "false")
    assert (maps["argocd-cmd-params-cm"]["server.insecure"], maps["argocd-rbac-cm"]["policy.default"]) == ("true", "")


def test_argo_cd_has_no_cluster_wide_rights_on_compute(installed):
    assert [o["metadata"]["name"] for o in installed if o["kind"] in ("ClusterRole", "ClusterRoleBinding")] == []


def test_the_deploy_check_finds_nothing_and_every_value_is_read(plan, releases, helm):
    from fabctl.check import ValuesCheck, check

    report = check(plan, parse_site(with_argocd(small_site())), *releases, ValuesCheck(helm, PROJECT_DIR))
    assert [f.line() for f in report.findings if f.blocking] == []
