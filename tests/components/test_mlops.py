"""The platform's delivery of the serving loop (docs/mlops.md): the DAG ConfigMap in Airflow's dags folder, the site's
settings beside it, the training-submission contract TrainingPool writes for it, Airflow's right to run Spark jobs, and
the serving repository's connection."""

from __future__ import annotations

import json

from helpers import render_small
from small_site import small_site

from components.config import ArgoCdConfig
from components.engines.airflow import (
    AIRFLOWIGNORE,
    DAGS_DIR,
    DAGS_SOURCE,
    FEATURE_JOB_SOURCE,
    SPARK_SUBMITTER_RULES,
    serving_repo_connection,
    serving_repo_settings,
)

COMPUTE = "site-t-compute"


def _config_map(plan, name: str, namespace: str = "airflow") -> dict:
    (found,) = [c for c in plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == name
                and c["metadata"]["namespace"] == namespace]
    return found


def _airflow_values(plan) -> dict:
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["chart"] == "airflow"]
    return release["inputs"]["values"]


def test_the_platform_dags_are_delivered_as_written(small_plan):
    data = _config_map(small_plan, "platform-dags")["data"]
    shipped = ("serving_loop.py", "serving_loop_steps.py")
    assert ([data[name] for name in shipped], data[".airflowignore"]) == (
        [(DAGS_SOURCE / name).read_text() for name in shipped], AIRFLOWIGNORE)


def test_every_airflow_pod_mounts_the_dags_inside_its_dags_folder(small_plan):
    values = _airflow_values(small_plan)
    assert ({"name": "platform-dags", "configMap": {"name": "platform-dags"}} in values["volumes"],
            [m["mountPath"] for m in values["volumeMounts"] if m["name"] == "platform-dags"]) == (True, [DAGS_DIR])


def test_the_dags_read_the_sites_buckets_images_and_spark_from_platform_json(small_plan):
    platform = json.loads(_config_map(small_plan, "platform-dags")["data"]["platform.json"])
    assert ({k: platform[k] for k in ("models_bucket", "checkpoints_bucket", "serving_repo")}, platform["spark"]["namespace"]) == (
        {"models_bucket": "site-t-models", "checkpoints_bucket": "site-t-checkpoints", "serving_repo": None}, "spark")


def test_the_feature_job_is_delivered_into_sparks_namespace(small_plan):
    assert _config_map(small_plan, "feature-job", "spark")["data"] == {FEATURE_JOB_SOURCE.name: FEATURE_JOB_SOURCE.read_text()}


def test_airflow_may_run_spark_applications_in_sparks_namespace_and_read_no_secrets(small_plan):
    (binding,) = [b for b in small_plan.objects("RoleBinding", COMPUTE) if b["metadata"]["name"] == "airflow-spark-submitter"]
    (role,) = [r for r in small_plan.objects("Role", COMPUTE) if r["metadata"]["name"] == "airflow-spark-submitter"]
    assert (binding["metadata"]["namespace"], binding["subjects"], role["rules"]) == (
        "spark", [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:serviceaccounts:airflow"}],
        SPARK_SUBMITTER_RULES)
    assert [r for r in role["rules"] if "secrets" in r["resources"]] == []


def test_training_pool_writes_the_submission_contract_for_the_dags(small_plan):
    submission = json.loads(_config_map(small_plan, "training-submission")["data"]["submission.json"])
    assert submission["teams"] == {
        "yield": {"cluster": "site-t-gpu", "namespace": "team-yield", "local_queue": "training", "connection": "gpu_gpu"}}


def test_every_airflow_pod_mounts_the_submission_contract(small_plan):
    mounts = {m["name"]: m["mountPath"] for m in _airflow_values(small_plan)["volumeMounts"]}
    assert mounts["training-submission"] == "/opt/airflow/platform/training"


def test_with_multikueue_on_compute_airflow_submits_there_in_cluster():
    plan = render_small(small_site(gpu_clusters=2, multikueue=True))
    submission = json.loads(_config_map(plan, "training-submission")["data"]["submission.json"])
    (binding,) = [b for b in plan.objects("RoleBinding", COMPUTE) if b["metadata"]["name"] == "airflow-submitter"]
    assert (submission["teams"]["yield"]["connection"], binding["metadata"]["namespace"], binding["roleRef"]["name"]) == (
        "kubernetes_default", "team-yield", "fab-airflow-submitter")


def test_without_argocd_airflow_has_no_serving_repository(small_plan):
    values = _airflow_values(small_plan)
    assert ("secret" in values, [s for s in small_plan.objects("Secret", COMPUTE) if s["metadata"]["name"] == "serving-repo"]) == (False, [])


def test_the_serving_repository_defaults_to_the_sites_directory():
    argocd = ArgoCdConfig.model_validate({"enabled": True, "serving_repo": {"url": "https://git.site-t.fab.internal/ml/serving.git"}})
    assert serving_repo_settings(argocd, "site-t") == {
        "url": "https://git.site-t.fab.internal/ml/serving.git", "revision": "main", "path": "sites/site-t", "username": "git",
        "connection": "serving_repo"}


def test_a_serving_repository_under_the_site_ca_domain_is_verified_with_the_site_ca():
    argocd = ArgoCdConfig.model_validate({"enabled": True, "serving_repo": {"url": "https://git.site-t.fab.internal/ml/serving.git"}})
    elsewhere = ArgoCdConfig.model_validate({"enabled": True, "serving_repo": {"url": "https://github.com/fab/serving.git"}})
    assert (serving_repo_settings(argocd, "site-t", site_ca_domain="site-t.fab.internal")["ca_file"],
            "ca_file" in serving_repo_settings(elsewhere, "site-t", site_ca_domain="site-t.fab.internal"),
            "ca_file" in serving_repo_settings(argocd, "site-t")) == ("/etc/fab/site-ca/ca.crt", False, False)


def test_the_serving_repository_connection_carries_the_token_as_its_password():
    assert json.loads(serving_repo_connection("https://git.example/ml/serving.git", "git", "tok")) == {
        "conn_type": "http", "host": "https://git.example/ml/serving.git", "login": "git", "password": "tok"}


WRITE_TOKEN = {"fab-platform:servingRepoWriteToken": {"secure": "v1:d3JpdGUtdG9rZW4="}}
"""`write-token`, the serving-loop DAG's token that may push."""


def _argocd_plan(*secrets: dict):
    from small_site import SERVING_REPO_TOKEN, with_argocd

    return render_small(with_argocd(small_site()), secrets={k: v for extra in (SERVING_REPO_TOKEN, *secrets) for k, v in extra.items()})


def _secret(plan, name: str, namespace: str) -> dict:
    (found,) = [s for s in plan.objects("Secret", COMPUTE) if s["metadata"]["name"] == name and s["metadata"]["namespace"] == namespace]
    return found


def test_with_a_write_token_airflow_gets_its_connection_to_push():
    plan = _argocd_plan(WRITE_TOKEN)
    platform = json.loads(_config_map(plan, "platform-dags")["data"]["platform.json"])
    assert (set(_secret(plan, "serving-repo", "airflow")["stringData"]), platform["serving_repo"]["connection"]) == (
        {"connection"}, "serving_repo")


def test_without_a_write_token_airflow_holds_no_serving_repository_token():
    """Argo CD's read-only token is there (its repository Secret), and Airflow does not get it."""
    plan = _argocd_plan()
    platform = json.loads(_config_map(plan, "platform-dags")["data"]["platform.json"])
    assert _secret(plan, "repo-serving", "argocd")["metadata"]["labels"] == {"argocd.argoproj.io/secret-type": "repository"}
    assert ([s["metadata"]["name"] for s in plan.objects("Secret", COMPUTE) if s["metadata"]["namespace"] == "airflow"
             and s["metadata"]["name"] == "serving-repo"], platform["serving_repo"]["connection"]) == ([], None)


def test_each_team_gets_its_airflow_role_named_as_its_keycloak_group(small_plan):
    api = _airflow_values(small_plan)["apiServer"]["apiServerConfig"]
    assert "\nTEAM_ROLES = ('team-yield',)\n" in api


def test_airflows_roles_and_dag_access_are_the_fab_auth_managers(small_plan):
    assert _airflow_values(small_plan)["config"]["core"] == {"auth_manager": "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"}


def test_a_team_without_a_serving_loop_has_no_dag():
    from components.config.schema.teams import Team
    from components.engines.airflow import serving_loops

    loop = {"training_images": ["registry.site-t.fab.internal/yield/train"], "features": {"w": {"table": "yield.f", "sql": "SELECT 1"}}}
    assert serving_loops({"fdc": Team(), "yield": Team(serving_loop=loop)}) == {"yield": {
        "role": "team-yield", "training_images": ["registry.site-t.fab.internal/yield/train"],
        "features": {"w": {"table": "yield.f", "sql": "SELECT 1"}}}}
