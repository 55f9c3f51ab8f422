"""Iceberg maintenance (compute.iceberg_maintenance): its config errors, the maintenance principal's Polaris grants and S3
policy, the SparkApplications the DAG submits (valid against the Spark operator's CRD), the DAG under Airflow's own DagBag,
and the statements the job runs."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from airflow_dagbag import _airflow_python, config_map_volume
from helpers import config_errors, render_small
from schemas import CrdSchemas
from small_site import add_bucket, small_site

from components import iceberg_maintenance_job as job
from components.config import IcebergMaintenanceConfig, credential_holders, parse_site
from components.data_access import maintenance_namespaces, namespace_location

COMPUTE, STORAGE = "site-t-compute", "site-t-storage"
DAG_FILE = Path(__file__).parents[2] / "components" / "dags" / "iceberg_maintenance.py"
MAINTENANCE = {
    "targets": [{"namespace": "fdc"}, {"namespace": "fdc.raw", "tables": "wafer_*"}],
    "quality_checks": [{"name": "no_null_lot", "table": "fdc.lots", "sql": "SELECT * FROM {table} WHERE lot_id IS NULL"}],
}


def maintained_site(**settings: Any) -> dict[str, Any]:
    site = small_site()
    site["compute"]["iceberg_maintenance"] = {**MAINTENANCE, **settings}
    return site


def _setup_plan(plan: Any) -> dict[str, Any]:
    (config,) = [c for c in plan.objects("ConfigMap", STORAGE) if c["metadata"]["name"] == "polaris-setup"]
    return json.loads(config["data"]["plan.json"])


def _platform(plan: Any) -> dict[str, Any]:
    (config,) = [c for c in plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "platform-dags"]
    return json.loads(config["data"]["platform.json"])


def _policy(plan: Any, name: str) -> dict[str, Any]:
    (policy,) = [r for r in plan.resources if r["type"] == "minio:index/iamPolicy:IamPolicy" and r["inputs"]["name"] == name]
    return json.loads(policy["inputs"]["policy"])


# ------------------------------------------------------------------------------------------------
# Config errors.


def test_fails_when_maintenance_is_on_without_airflow():
    site = maintained_site()
    site["compute"]["airflow"] = {"enabled": False}
    assert config_errors(site) == [
        ("fab-platform:site.compute.iceberg_maintenance.enabled: is true, but compute.airflow is off: the maintenance runs as "
        "Spark jobs that Airflow schedules; switch them on, or set compute.iceberg_maintenance.enabled to false")
    ]


def test_fails_when_a_quality_check_reads_a_namespace_outside_the_targets():
    checks = [{"name": "no_null_lot", "table": "mes.lots", "sql": "SELECT * FROM {table} WHERE lot_id IS NULL"}]
    assert config_errors(maintained_site(quality_checks=checks)) == [
        ("fab-platform:site.compute.iceberg_maintenance.quality_checks[0].table: 'mes.lots' is in namespace 'mes', which is not "
        "among the targets (fdc, fdc.raw); the maintenance principal reads only those: add the namespace to "
        "compute.iceberg_maintenance.targets")
    ]


def test_fails_when_a_namespace_is_listed_twice():
    targets = [{"namespace": "fdc"}, {"namespace": "fdc", "tables": "lot_*"}]
    assert config_errors(maintained_site(targets=targets, quality_checks=[])) == [
        ("fab-platform:site.compute.iceberg_maintenance.targets[1].namespace: 'fdc' is maintained by the same task as targets 0 "
        "('fdc'): one target per namespace; put its tables in one glob, or list the namespace once with tables '*'")
    ]


def test_fails_when_orphan_files_would_be_removed_within_a_day():
    assert config_errors(maintained_site(orphan_file_age_days=0)) == [
        "fab-platform:site.compute.iceberg_maintenance.orphan_file_age_days: Input should be greater than or equal to 1 (got 0)"
    ]


def test_fails_when_a_quality_check_is_not_a_query():
    checks = [{"name": "cleanup", "table": "fdc.lots", "sql": "DELETE FROM {table} WHERE lot_id IS NULL"}]
    assert config_errors(maintained_site(quality_checks=checks)) == [
        ("fab-platform:site.compute.iceberg_maintenance.quality_checks[0].sql: must be a query (SELECT or WITH ...) "
        "whose rows are the violations; it may not change data (got 'DELETE FROM {table} WHERE lot_id IS NULL')")
    ]


def test_fails_when_the_schedule_is_not_cron():
    assert config_errors(maintained_site(schedule="nightly")) == [
        ("fab-platform:site.compute.iceberg_maintenance.schedule: has 1 fields; a cron schedule has five fields, "
        "minute hour day-of-month month day-of-week, such as '0 19 * * 1-5', or is one of @yearly, @annually, @monthly, "
        "@weekly, @daily, @midnight, @hourly (got 'nightly')")
    ]


def test_maintenance_is_off_without_the_section():
    assert parse_site(small_site()).compute.iceberg_maintenance is None


# ------------------------------------------------------------------------------------------------
# The maintenance principal.


SNAPSHOT_PRIVILEGES = ("TABLE_LIST", "TABLE_READ_PROPERTIES", "TABLE_ADD_SNAPSHOT", "TABLE_SET_SNAPSHOT_REF", "TABLE_REMOVE_SNAPSHOTS",
                       "TABLE_REMOVE_SNAPSHOT_REF", "TABLE_REMOVE_STATISTICS")
"""Listing, loading without credentials, and snapshot commits (Polaris 1.7.0's fine-grained updateTable privileges): no
TABLE_WRITE_DATA, which implies schema, location and property changes."""


def test_the_maintenance_principal_holds_snapshot_privileges_on_its_namespaces_alone():
    setup = _setup_plan(render_small(maintained_site()))
    assert setup["catalog_roles"]["maintenance"] == [
        *({"type": "namespace", "namespace": ["fdc"], "privilege": p} for p in SNAPSHOT_PRIVILEGES),
        *({"type": "namespace", "namespace": ["fdc", "raw"], "privilege": p} for p in SNAPSHOT_PRIVILEGES),
    ]
    assert [p for p in setup["principals"] if p["name"] == "fab-iceberg-maintenance"] == [{
        "name": "fab-iceberg-maintenance", "principal_role": "fab-iceberg-maintenance", "catalog_roles": ["maintenance"],
        "credentials_env": "ICEBERG_MAINTENANCE",
    }]


def test_polaris_authorizes_table_commits_per_metadata_update():
    (release,) = [r for r in render_small(maintained_site()).resources
                  if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("chart") == "polaris"]
    assert release["inputs"]["values"]["features"]["ENABLE_FINE_GRAINED_UPDATE_TABLE_PRIVILEGES"] is True


def test_the_setup_job_creates_the_maintained_namespaces_parents_first():
    assert maintenance_namespaces(["fdc.raw.wafer", "gold"]) == [["fdc"], ["gold"], ["fdc", "raw"], ["fdc", "raw", "wafer"]]


def test_the_maintenance_keys_reach_only_the_namespaces_locations():
    policy = _policy(render_small(maintained_site()), "fab-iceberg-maintenance")
    assert policy["Statement"][:2] == [
        {"Sid": "ListNamespacePrefixes", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::site-t-warehouse"],
         "Condition": {"StringLike": {"s3:prefix": ["fdc/*", "fdc/raw/*"]}}},
        {"Sid": "NamespaceObjects", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts"],
         "Resource": ["arn:aws:s3:::site-t-warehouse/fdc/*", "arn:aws:s3:::site-t-warehouse/fdc/raw/*"]},
    ]


def test_the_gold_namespace_is_maintained_at_the_gold_location():
    site = small_site()
    add_bucket(site, "site-t-gold", "gold")
    assert namespace_location(parse_site(site).storage, "gold") == ("site-t-gold", "gold/")


def test_the_maintenance_credentials_are_delivered_into_its_own_namespace_alone():
    secrets = [s for s in render_small(maintained_site()).objects("Secret", COMPUTE) if "iceberg-maintenance" in s["metadata"]["name"]]
    assert sorted((s["metadata"]["namespace"], s["metadata"]["name"], s["metadata"]["labels"]["fab.internal/engine"]) for s in secrets) == [
        ("iceberg-maintenance", "polaris-iceberg-maintenance", "iceberg-maintenance"),
        ("iceberg-maintenance", "s3-iceberg-maintenance", "iceberg-maintenance"),
    ]


def test_sparks_operator_runs_applications_in_the_maintenance_namespace():
    (release,) = [r for r in render_small(maintained_site()).resources
                  if r["type"] == "kubernetes:helm.sh/v3:Release" and r["inputs"].get("chart") == "spark-operator"]
    assert "iceberg-maintenance" in release["inputs"]["values"]["spark"]["jobNamespaces"]


def test_the_maintenance_namespace_has_the_job():
    # No spark-defaults: the applications carry the catalog in their sparkConf (the drivers never read a sparkConfigMap).
    plan = render_small(maintained_site())
    assert sorted(c["metadata"]["name"] for c in plan.objects("ConfigMap", COMPUTE) if c["metadata"]["namespace"] == "iceberg-maintenance") == [
        "iceberg-maintenance-job"]


def test_the_maintenance_namespace_may_request_no_gpu():
    quotas = [q for q in render_small(maintained_site()).objects("ResourceQuota", COMPUTE) if q["metadata"]["namespace"] == "iceberg-maintenance"]
    assert [q["spec"]["hard"] for q in quotas] == [{"requests.nvidia.com/gpu": "0"}]


def test_airflow_may_submit_maintenance_applications_but_read_no_secret():
    (role,) = [r for r in render_small(maintained_site()).objects("Role", COMPUTE) if r["metadata"]["namespace"] == "iceberg-maintenance"]
    assert [resource for rule in role["rules"] for resource in rule["resources"]] == ["sparkapplications", "pods", "pods/log", "events"]


def test_the_config_knows_compute_holds_the_maintenance_credentials():
    holders = credential_holders(parse_site(maintained_site()))
    assert ("iceberg-maintenance" in holders["s3"]["compute"], "iceberg-maintenance" in holders["polaris"]["compute"]) == (True, True)


def test_no_maintenance_principal_without_the_section():
    plan = render_small(small_site())
    assert "fab-iceberg-maintenance" not in json.dumps(_setup_plan(plan))
    assert _platform(plan)["iceberg_maintenance"] is None


# ------------------------------------------------------------------------------------------------
# What the DAG submits.


def test_the_dag_submits_one_application_per_namespace_then_the_quality_checks():
    settings = _platform(render_small(maintained_site()))["iceberg_maintenance"]
    assert (settings["schedule"], settings["namespace"], list(settings["applications"])) == (
        "0 2 * * *", "iceberg-maintenance", ["maintain_fdc", "maintain_fdc_raw", "quality_checks"])


def test_the_applications_validate_against_the_spark_operators_crd(crd_dir):
    applications = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]
    assert applications
    crds = CrdSchemas(crd_dir)
    assert {task: crds.errors(app) for task, app in applications.items()} == {task: [] for task in applications}


def test_the_applications_run_as_the_maintenance_principal_in_the_batch_pool():
    spec = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]["maintain_fdc_raw"]["spec"]
    credentials = [{"secretRef": {"name": "s3-iceberg-maintenance"}}, {"secretRef": {"name": "polaris-iceberg-maintenance"}}]
    assert (spec["driver"]["envFrom"], spec["executor"]["envFrom"], spec["nodeSelector"], spec["batchSchedulerOptions"]) == (
        credentials, credentials, {"fab.internal/compute-pool": "batch"}, {"queue": "root.batch"})


def test_the_applications_ask_polaris_for_no_credentials_and_send_no_metrics():
    spec = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]["maintain_fdc"]["spec"]
    conf = spec["sparkConf"]
    assert (conf["spark.sql.catalog.fab.header.X-Iceberg-Access-Delegation"], conf["spark.sql.catalog.fab.rest-metrics-reporting-enabled"]) == (
        "", "false")


def test_the_applications_read_the_polaris_catalog_from_their_spark_conf():
    # Spark 3.5 drivers read sparkConf (spark-submit --conf), never a sparkConfigMap's spark-defaults.conf.
    spec = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]["maintain_fdc"]["spec"]
    conf = spec["sparkConf"]
    assert ("sparkConfigMap" in spec, conf["spark.sql.defaultCatalog"], conf["spark.sql.catalog.fab.uri"],
            conf["spark.sql.catalog.fab.credential"]) == (
        False, "fab", "http://polaris-rest.polaris.svc:8181/api/catalog", "env:POLARIS_CREDENTIAL")


def test_the_applications_resolve_their_packages_into_a_writable_tmp():
    spec = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]["maintain_fdc"]["spec"]
    assert (spec["sparkConf"]["spark.jars.ivy"], spec["volumes"][0], spec["driver"]["volumeMounts"][0], spec["executor"]["volumeMounts"]) == (
        "/tmp/ivy", {"name": "tmp", "emptyDir": {"sizeLimit": "4Gi"}}, {"name": "tmp", "mountPath": "/tmp"}, [{"name": "tmp", "mountPath": "/tmp"}])


def test_a_namespaces_application_gets_its_glob_and_the_retention_settings():
    spec = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]["maintain_fdc_raw"]["spec"]
    assert spec["arguments"] == ["--step", "maintain", "--namespace", "fdc.raw", "--tables", "wafer_*", "--settings", json.dumps(
        {"min_snapshots_kept": 1, "orphan_file_age_days": 3, "pinned_tag_prefixes": ["fab-"], "snapshot_retention_days": 7,
         "target_file_size_mib": 512}, sort_keys=True)]


# ------------------------------------------------------------------------------------------------
# The job's statements.

SETTINGS = IcebergMaintenanceConfig(targets=[{"namespace": "fdc"}], snapshot_retention_days=7, min_snapshots_kept=5).model_dump()
NOW = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)


def test_the_job_compacts_rewrites_manifests_expires_then_removes_orphans():
    assert job.statements("fdc.lots", SETTINGS, NOW) == [
        ("rewrite_data_files", ("CALL fab.system.rewrite_data_files(table => 'fdc.lots', strategy => 'binpack', "
                               "options => map('target-file-size-bytes', '536870912', 'partial-progress.enabled', 'true'))")),
        ("rewrite_manifests", "CALL fab.system.rewrite_manifests(table => 'fdc.lots')"),
        ("expire_snapshots", ("CALL fab.system.expire_snapshots(table => 'fdc.lots', older_than => TIMESTAMP '2026-03-03 02:00:00', "
                             "retain_last => 5)")),
        ("remove_orphan_files", ("CALL fab.system.remove_orphan_files(table => 'fdc.lots', older_than => TIMESTAMP "
                                "'2026-03-07 02:00:00', prefix_listing => true)")),
    ]


def test_the_job_refuses_a_pinned_tag_that_would_expire_by_its_own_age():
    refs = [{"name": "main", "type": "BRANCH", "max_reference_age_in_ms": None},
            {"name": "fab-run-1", "type": "TAG", "max_reference_age_in_ms": 86_400_000},
            {"name": "fab-run-2", "type": "TAG", "max_reference_age_in_ms": None},
            {"name": "scratch", "type": "TAG", "max_reference_age_in_ms": 86_400_000}]
    assert job.expiring_pins(refs, ["fab-"]) == ["fab-run-1"]


def test_the_job_maintains_the_tables_matching_the_glob():
    assert job.matching(["wafer_a", "lots", "wafer_b", "Wafer_c"], "wafer_*") == ["wafer_a", "wafer_b"]


def test_a_quality_check_reads_its_table_in_the_catalog():
    check = {"name": "no_null_lot", "table": "fdc.lots", "sql": "SELECT * FROM {table} WHERE lot_id IS NULL"}
    assert job.check_query(check) == "SELECT * FROM (SELECT * FROM fab.`fdc`.`lots` WHERE lot_id IS NULL) LIMIT 20"


# ------------------------------------------------------------------------------------------------
# Airflow's own loader.

AIRFLOW_CHECK = textwrap.dedent('''
    import json, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1], include_examples=False)
    dag = bag.dags.get("iceberg_maintenance")
    print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dags),
                      "upstream": None if dag is None else {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},
                      "rules": None if dag is None else {t.task_id: getattr(t.trigger_rule, "value", t.trigger_rule) for t in dag.tasks},
                      "outlets": None if dag is None else [o.name for o in dag.get_task("maintained").outlets]}))
''')


def _dagbag(tmp_path: Path, platform: dict[str, Any]) -> dict[str, Any]:
    from components.engines.airflow import AIRFLOWIGNORE

    dags = tmp_path / "dags"
    config_map_volume(dags / "platform", {DAG_FILE.name: DAG_FILE.read_text(), ".airflowignore": AIRFLOWIGNORE,
                                          "platform.json": json.dumps(platform)})
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "false"}
    out = subprocess.run([_airflow_python(), "-c", AIRFLOW_CHECK, str(dags)], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(_airflow_python() is None, reason="Apache Airflow is not installed here (nor named by FAB_AIRFLOW_PYTHON)")
def test_airflows_dagbag_loads_the_maintenance_dag_from_the_configmap_volume(tmp_path):
    result = _dagbag(tmp_path, _platform(render_small(maintained_site())))
    assert (result["errors"], result["upstream"], result["rules"], result["outlets"]) == (
        {},
        {"maintain_fdc": [], "maintain_fdc_raw": [], "quality_checks": ["maintain_fdc", "maintain_fdc_raw"],
         "maintained": ["maintain_fdc", "maintain_fdc_raw", "quality_checks"]},
        {"maintain_fdc": "all_success", "maintain_fdc_raw": "all_success", "quality_checks": "all_done", "maintained": "all_success"},
        ["iceberg_maintenance"],
    )


@pytest.mark.skipif(_airflow_python() is None, reason="Apache Airflow is not installed here (nor named by FAB_AIRFLOW_PYTHON)")
def test_a_site_without_maintenance_gets_no_maintenance_dag(tmp_path):
    result = _dagbag(tmp_path, _platform(render_small(small_site())))
    assert (result["errors"], result["dags"]) == ({}, [])


def _defaulted(node: Any, schema: dict[str, Any]) -> Any:
    """`node` with the structural defaults of `schema` applied, as the API server applies a CRD's before admission."""
    if isinstance(node, dict) and schema.get("properties"):
        out = {k: _defaulted(v, schema["properties"].get(k, {})) for k, v in node.items()}
        for key, prop in schema["properties"].items():
            if key not in out and "default" in prop:
                out[key] = prop["default"]
        return out
    if isinstance(node, list) and "items" in schema:
        return [_defaulted(v, schema["items"]) for v in node]
    return node


def test_what_the_api_server_and_the_operator_default_leaves_the_application_admitted(crd_dir):
    """The maintenance policy pins the application's spec: the CRD's structural defaults and the Spark operator's defaulter
    (v2.5.2 SetSparkApplicationDefaults: type, mode, restartPolicy, driver and executor cores and memory, instances)
    run before it and must change nothing it pins."""
    from admission import admit
    from admission_cases import application_request, submitted

    from components import iceberg_maintenance

    apps = _platform(render_small(maintained_site()))["iceberg_maintenance"]["applications"]
    crds = CrdSchemas(crd_dir)
    schema = crds._version("sparkoperator.k8s.io/v1beta2", "SparkApplication")["schema"]["openAPIV3Schema"]
    spec = iceberg_maintenance.admission_policy(apps)
    policy = {"metadata": {"name": iceberg_maintenance.ADMISSION_POLICY}, "spec": spec}
    binding = {"spec": {"policyName": iceberg_maintenance.ADMISSION_POLICY, "validationActions": ["Deny"]}}
    for app in apps.values():
        defaulted = _defaulted(app, schema)
        # the operator's defaulter sets only what is absent, and the application sets all of it
        assert {"type", "mode", "restartPolicy"} <= set(defaulted["spec"])
        for role, fields in (("driver", ("cores", "memory")), ("executor", ("cores", "memory", "instances"))):
            assert set(fields) <= set(defaulted["spec"][role])
        assert admit(policy, binding, application_request(submitted(defaulted))).allowed
