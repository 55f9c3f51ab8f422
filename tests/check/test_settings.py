"""fabctl check, settings.read: every setting reaches its reader where that reader looks (fabctl/check/settings.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from helpers import site_raw

from components import versions
from components.config import parse_site
from fabctl.check import check

SPARK_3 = f"apache/spark:{versions.SPARK_IMAGE.split(':', 1)[1]}"
DEFAULTS = "spark.sql.defaultCatalog fab\nspark.sql.catalog.fab.type rest\nspark.sql.catalog.fab.uri http://polaris-rest.polaris.svc:8181/api/catalog\n"
UNREAD_BY_3 = f"but Spark 3.5.7 (image {SPARK_3}) starts its driver with --properties-file and never reads that file"
SPARK_FIX = ("set them in the application's spec.sparkConf (spark-submit --conf), credentials as env:NAME references to the "
             "Secrets of its envFrom (components/engines/spark.py spark_application_template)")
WHAT = "spark.sql.catalog.fab.uri=http://polaris-rest.polaris.svc:8181/api/catalog and 2 more settings"


def test_neither_stack_file_delivers_a_setting_its_reader_cannot_see(plan, releases_of):
    releases, missing = releases_of(plan.stack)
    report = check(plan, parse_site(site_raw(plan.stack)), releases, missing)
    assert [f.line() for f in report.findings if f.rule.startswith("settings.")] == []


def test_the_smallest_site_delivers_every_setting_where_it_is_read(small):
    assert small.lines("settings.read") == []


# Helpers: bring a defect back into a copy of the smallest site's render.

def _record(small, name: str) -> dict[str, Any]:
    return small.resource(name)


def _add(small, like: str, name: str, obj: dict[str, Any]) -> None:
    """Add `obj` to the plan as resource `name`, applied on the cluster of resource `like`."""
    record = copy.deepcopy(_record(small, like))
    kind = f"kubernetes:{obj['apiVersion']}:{obj['kind']}"
    record.update(type=kind, name=name, urn=record["urn"].rsplit("$", 1)[0] + f"${kind}::{name}", inputs=obj, dependencies=[])
    small.plan.resources.append(record)


def _spark_defaults(small, namespace: str = "spark") -> None:
    """The ConfigMap `spark-defaults` with spark-defaults.conf, as the program used to make it."""
    _add(small, "compute-spark-application", f"compute-spark-defaults-{namespace}", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "spark-defaults", "namespace": namespace},
        "data": {"spark-defaults.conf": DEFAULTS}})


def _template(small) -> dict[str, Any]:
    return yaml.safe_load(_record(small, "compute-spark-application")["inputs"]["data"]["sparkapplication.yaml"])


def _set_template(small, app: dict[str, Any]) -> None:
    _record(small, "compute-spark-application")["inputs"]["data"]["sparkapplication.yaml"] = yaml.safe_dump(app)


def _application(small, kind: str = "SparkApplication", image: str = SPARK_3, **spec: Any) -> dict[str, Any]:
    """A job of the platform's template, applied in `spark`, with `spec`'s fields."""
    app = _template(small)
    app["metadata"]["name"] = "etl"
    app["spec"].update(type="Python", image=image, mainApplicationFile="local:///app/etl.py", **spec)
    if kind == "ScheduledSparkApplication":
        return {"apiVersion": app["apiVersion"], "kind": kind, "metadata": app["metadata"],
                "spec": {"schedule": "@daily", "template": app["spec"]}}
    return app


# Spark's sparkConfigMap.

def test_fails_when_airflows_spark_template_names_a_spark_config_map(small):
    _spark_defaults(small)
    app = _template(small)
    app["spec"]["sparkConfigMap"] = "spark-defaults"
    _set_template(small, app)
    assert small.lines("settings.read") == [
        ("error [settings.read] site-t-compute ConfigMap airflow/spark-application (compute-spark-application): "
        f"data.sparkapplication.yaml: SparkApplication spark/(template) gets spark-defaults.conf ({WHAT}) from its "
        "sparkConfigMap spark/spark-defaults, but the application names no image tag or sparkVersion, and neither a Spark 3 "
        "driver (it starts with --properties-file) nor a Spark 4 one without the operator's LoadSparkDefaults gate reads "
        f"that file. Fix: {SPARK_FIX}")
    ]


def test_fails_when_the_maintenance_dags_applications_name_a_spark_config_map(small):
    _spark_defaults(small, "iceberg-maintenance")
    app = _template(small)
    app["metadata"]["namespace"] = "iceberg-maintenance"
    app["spec"].update(sparkConfigMap="spark-defaults", image=SPARK_3, sparkVersion="3.5.7")
    data = _record(small, "compute-platform-dags")["inputs"]["data"]
    platform = json.loads(data["platform.json"])
    platform["iceberg_maintenance"] = {"schedule": "0 2 * * *", "namespace": "iceberg-maintenance", "applications": {"maintain_fdc": app}}
    data["platform.json"] = json.dumps(platform)
    assert [f.problem for f in small.findings("settings.read")] == [
        ("data.platform.json iceberg_maintenance.applications.maintain_fdc: SparkApplication iceberg-maintenance/(template) gets "
        f"spark-defaults.conf ({WHAT}) from its sparkConfigMap iceberg-maintenance/spark-defaults, {UNREAD_BY_3}")
    ]


def test_fails_when_a_spark_application_names_a_spark_config_map(small):
    _spark_defaults(small)
    _add(small, "compute-spark-application", "compute-etl", _application(small, sparkConfigMap="spark-defaults"))
    assert [(f.subject, f.problem) for f in small.findings("settings.read")] == [(
        "SparkApplication spark/etl",
        f"SparkApplication spark/etl gets spark-defaults.conf ({WHAT}) from its sparkConfigMap spark/spark-defaults, {UNREAD_BY_3}",
    )]


def test_fails_when_a_scheduled_spark_application_names_a_spark_config_map(small):
    _spark_defaults(small)
    _add(small, "compute-spark-application", "compute-etl", _application(small, "ScheduledSparkApplication", sparkConfigMap="spark-defaults"))
    assert [(f.subject, f.problem) for f in small.findings("settings.read")] == [(
        "ScheduledSparkApplication spark/etl",
        f"ScheduledSparkApplication spark/etl gets spark-defaults.conf ({WHAT}) from its sparkConfigMap spark/spark-defaults, {UNREAD_BY_3}",
    )]


def test_fails_when_a_spark_4_application_names_a_spark_config_map_and_the_operator_does_not_load_it(small):
    _spark_defaults(small)
    _add(small, "compute-spark-application", "compute-etl", _application(small, image="apache/spark:4.0.1", sparkConfigMap="spark-defaults"))
    assert [f.problem for f in small.findings("settings.read")] == [
        (f"SparkApplication spark/etl gets spark-defaults.conf ({WHAT}) from its sparkConfigMap spark/spark-defaults, but Spark 4.0.1 "
        "(image apache/spark:4.0.1) reads that file only with --load-spark-defaults, which the Spark operator passes only with "
        "its LoadSparkDefaults feature gate, off on this cluster")
    ]


def test_a_spark_4_application_reads_its_spark_config_map_when_the_operator_loads_it(small):
    _spark_defaults(small)
    _add(small, "compute-spark-application", "compute-etl", _application(small, image="apache/spark:4.0.1", sparkConfigMap="spark-defaults"))
    values = _record(small, "compute-spark-operator")["inputs"]["values"]
    values["controller"]["featureGates"] = [{"name": "LoadSparkDefaults", "enabled": True}]
    assert small.lines("settings.read") == []


def test_a_spark_config_map_without_spark_defaults_is_not_a_settings_delivery(small):
    # log4j2.properties and the like: SPARK_CONF_DIR, which the webhook sets, is where Spark reads them.
    _add(small, "compute-spark-application", "compute-spark-logging", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "spark-logging", "namespace": "spark"},
        "data": {"log4j2.properties": "rootLogger.level = warn\n"}})
    _add(small, "compute-spark-application", "compute-etl", _application(small, sparkConfigMap="spark-logging"))
    assert small.lines("settings.read") == []


# Configuration folder variables.

def _connect_container(small) -> dict[str, Any]:
    return _record(small, "compute-spark-connect-yield")["inputs"]["spec"]["template"]["spec"]["containers"][0]


def test_fails_when_a_container_points_spark_conf_dir_at_a_folder_nothing_mounts(small):
    container = _connect_container(small)
    container["volumeMounts"] = [m for m in container["volumeMounts"] if m["mountPath"] != "/etc/spark"]
    assert small.lines("settings.read") == [
        ("error [settings.read] site-t-compute Deployment spark-team-yield/spark-connect (compute-spark-connect-yield): "
        "spec.template.spec.containers[0] (spark-connect) sets SPARK_CONF_DIR=/etc/spark, a folder no volume of the container "
        "mounts: Spark finds no configuration there. Fix: mount Spark's configuration at /etc/spark (a ConfigMap volume), "
        "or drop SPARK_CONF_DIR")
    ]


def test_the_images_own_configuration_folder_needs_no_volume(small):
    env = _connect_container(small)["env"]
    (conf,) = [e for e in env if e["name"] == "SPARK_CONF_DIR"]
    conf["value"] = "/opt/spark/conf"
    assert small.lines("settings.read") == []


def test_fails_when_a_spark_driver_points_hadoop_conf_dir_at_a_folder_nothing_mounts(small):
    app = _application(small)
    app["spec"]["driver"]["env"] = [{"name": "HADOOP_CONF_DIR", "value": "/etc/hadoop/conf"}]
    _add(small, "compute-spark-application", "compute-etl", app)
    assert [f.problem for f in small.findings("settings.read")] == [
        ("SparkApplication spark/etl sets HADOOP_CONF_DIR=/etc/hadoop/conf in its driver, a folder none of its volumeMounts "
        "mounts: Hadoop finds no configuration there")
    ]


def test_the_operators_hadoop_config_map_mounts_the_folder(small):
    app = _application(small, hadoopConfigMap="hadoop-site")
    app["spec"]["driver"]["env"] = [{"name": "HADOOP_CONF_DIR", "value": "/etc/hadoop/conf"}]
    _add(small, "compute-spark-application", "compute-etl", app)
    assert small.lines("settings.read") == []


def _singleuser(small) -> dict[str, Any]:
    return _record(small, "compute-jupyterhub")["inputs"]["values"]["singleuser"]


def test_fails_when_notebooks_point_spark_conf_dir_at_a_folder_nothing_mounts(small):
    _singleuser(small).setdefault("extraEnv", {})["SPARK_CONF_DIR"] = "/etc/spark"
    assert small.lines("settings.read") == [
        ("error [settings.read] site-t-compute HelmRelease jupyterhub/jupyterhub (compute-jupyterhub): values.singleuser.extraEnv "
        "sets SPARK_CONF_DIR=/etc/spark in every single-user server, a folder no volume mounts "
        "(singleuser.storage.extraVolumeMounts): Spark finds no configuration there. Fix: mount Spark's configuration there "
        "(singleuser.storage.extraVolumes and extraVolumeMounts), or drop SPARK_CONF_DIR")
    ]


def test_notebooks_may_point_spark_conf_dir_at_a_mounted_folder(small):
    singleuser = _singleuser(small)
    singleuser.setdefault("extraEnv", {})["SPARK_CONF_DIR"] = "/etc/spark"
    singleuser.setdefault("storage", {})["extraVolumeMounts"] = [{"name": "spark-conf", "mountPath": "/etc/spark"}]
    assert small.lines("settings.read") == []
