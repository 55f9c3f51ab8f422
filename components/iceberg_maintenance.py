"""Iceberg maintenance as shipped, scheduled work (DESIGN use cases 2 and 5; docs/operations.md, "Iceberg maintenance").

With `compute.iceberg_maintenance`, the platform's `iceberg_maintenance` DAG (components/dags/iceberg_maintenance.py)
submits, on its schedule, one SparkApplication per configured namespace and then one for the quality checks. They are
built here, whole, from Spark's template (batch pool, YuniKorn batch queue, the Polaris catalog and the internal S3
endpoint in `sparkConf`) and handed to the DAG in `platform.json`, so that what runs is what the tests validate. They
run the platform's job (components/iceberg_maintenance_job.py, the ConfigMap `iceberg-maintenance-job`) as the
maintenance principal (`s3-iceberg-maintenance`, `polaris-iceberg-maintenance`), which may touch only the configured
namespaces (components/data_access.py MAINTENANCE_PRIVILEGES and its S3 policy). All of them are in a namespace of their
own, `iceberg-maintenance` (Spark's operator watches it), so that no other Spark job, nor a driver creating pods in its
own namespace, can mount those Secrets. Every Airflow task may submit there (they share Airflow's ServiceAccounts), so the
ValidatingAdmissionPolicy `fab-iceberg-maintenance-applications` admits only these applications: Airflow's identity, and
a spec that is the platform's but for the arguments, which are one shipped application's; a pod's spec there never
changes after creation (so no patched image runs with the principal's keys).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from components import versions
from components.config import IcebergMaintenanceConfig
from components.constants import AIRFLOW_NAMESPACE, CATALOG_CONF, ENGINE_LABEL, MAINTENANCE_NAMESPACE, credentials
from components.constants import MAINTENANCE_PRINCIPAL as MAINTENANCE
from components.registry import UPSTREAM, Registry

JOB_SOURCE = Path(__file__).with_name("iceberg_maintenance_job.py")
JOB_CONFIG_MAP = "iceberg-maintenance-job"
"""The ConfigMap in MAINTENANCE_NAMESPACE with the maintenance job, mounted on the driver at JOB_DIR."""
JOB_DIR = "/opt/fab-maintenance"
DAG_ID = "iceberg_maintenance"
QUALITY_TASK = "quality_checks"
ICEBERG_PACKAGES = tuple(p for p in versions.SPARK_PACKAGES if p.startswith("org.apache.iceberg:"))
"""Iceberg's Spark runtime and its S3 client (not in the Spark image), resolved by spark-submit like the Connect server's."""
DRIVER = {"cores": 1, "coreLimit": "1", "memory": "2g"}
EXECUTORS = {"instances": 2, "cores": 2, "coreLimit": "2", "memory": "4g"}
"""Sized for nightly compaction of a namespace; the batch queue's limits bound what all maintenance jobs take together."""
MAINTENANCE_CONF = {
    # No credential vending (Polaris 1.7.0 AccessDelegationMode.fromProtocolValuesList: an empty header asks for none):
    # loadTable then needs TABLE_READ_PROPERTIES only, and the job reads and writes with the maintenance principal's own
    # S3 keys (its environment), which reach only its namespaces' locations (data_access.MAINTENANCE_PRIVILEGES).
    f"{CATALOG_CONF}.header.X-Iceberg-Access-Delegation": "",
    # No scan and commit reports to Polaris (Iceberg 1.10 RESTSessionCatalog `rest-metrics-reporting-enabled`): they need
    # TABLE_READ_DATA and TABLE_WRITE_DATA (REPORT_READ_METRICS, REPORT_WRITE_METRICS), which the principal does not hold.
    f"{CATALOG_CONF}.rest-metrics-reporting-enabled": "false",
}
"""What the maintenance applications set over the template's catalog settings (`sparkConf`)."""
TTL_SECONDS = 3 * 24 * 3600
"""A finished application (and its driver's log) stays three days for `kubectl logs`, then the operator removes it."""


def task_id(namespace: str) -> str:
    """The DAG task of one namespace: `maintain_<namespace>`, dots as underscores (`fdc.raw` -> `maintain_fdc_raw`)."""
    return "maintain_" + re.sub(r"[^A-Za-z0-9_]", "_", namespace)


def settings(config: IcebergMaintenanceConfig, quality: bool = False) -> dict[str, Any]:
    """What the job reads of the config (`--settings`): the retention settings, or the quality checks."""
    if quality:
        return config.model_dump(mode="json", include={"quality_checks"})
    return config.model_dump(mode="json", exclude={"enabled", "schedule", "targets", "quality_checks"})


def _container_security() -> dict[str, Any]:
    # Spark's image runs as its own user (185) and writes its work directory: no read-only root filesystem (Ivy's
    # directory is on the template's /tmp volume).
    return {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}


def application(config: IcebergMaintenanceConfig, arguments: list[str], template: dict[str, Any],
                registry: Registry = UPSTREAM) -> dict[str, Any]:
    """One maintenance SparkApplication: Spark's template (`template`, components/engines/spark.py
    `spark_application_template` for the site's catalog, registry and CA; copied) plus the job, its Iceberg packages, and
    the maintenance principal's Secrets as the driver's and executors' environment (what `sparkConf`'s environment
    references read) in place of the Spark engine's."""
    app = copy.deepcopy(template)
    app["metadata"]["namespace"] = MAINTENANCE_NAMESPACE
    spec = app["spec"]
    principal = credentials(MAINTENANCE)
    labels = {ENGINE_LABEL: MAINTENANCE}
    spec.update({
        "type": "Python",
        "pythonVersion": "3",
        "image": registry.image(versions.SPARK_IMAGE),
        "sparkVersion": versions.SPARK_VERSION,
        "mainApplicationFile": f"local://{JOB_DIR}/{JOB_SOURCE.name}",
        "arguments": [*arguments, "--settings", json.dumps(settings(config, quality="quality" in arguments), sort_keys=True)],
        "deps": {"packages": list(ICEBERG_PACKAGES)},
        "restartPolicy": {"type": "Never"},
        "timeToLiveSeconds": TTL_SECONDS,
        "volumes": [*spec.get("volumes", []), {"name": JOB_CONFIG_MAP, "configMap": {"name": JOB_CONFIG_MAP}}],
        "sparkConf": {**spec.get("sparkConf", {}), **MAINTENANCE_CONF},
    })
    driver = spec["driver"]
    driver.update({
        **DRIVER, "labels": labels, "envFrom": principal, "securityContext": _container_security(),
        "volumeMounts": [*driver.get("volumeMounts", []), {"name": JOB_CONFIG_MAP, "mountPath": JOB_DIR, "readOnly": True}],
    })
    spec["executor"].update({**EXECUTORS, "labels": labels, "envFrom": principal, "securityContext": _container_security()})
    return app


def applications(config: IcebergMaintenanceConfig, template: dict[str, Any],
                 registry: Registry = UPSTREAM) -> dict[str, dict[str, Any]]:
    """Task id -> the SparkApplication it submits (from Spark's `template`): one per target, in config order, then the
    quality checks (if any)."""
    apps = {task_id(t.namespace): application(config, ["--step", "maintain", "--namespace", t.namespace, "--tables", t.tables],
                                              template, registry)
            for t in config.targets}
    if config.quality_checks:
        apps[QUALITY_TASK] = application(config, ["--step", "quality"], template, registry)
    return apps


def enabled(config: IcebergMaintenanceConfig | None) -> bool:
    """Whether the site maintains its tables (the DAG and its applications exist)."""
    return config is not None and config.enabled


def dag_settings(config: IcebergMaintenanceConfig | None, template: dict[str, Any],
                 registry: Registry = UPSTREAM) -> dict[str, Any] | None:
    """`platform.json` `iceberg_maintenance`: the DAG's schedule and its applications (from Spark's `template`), or
    None (no DAG) while off."""
    if config is None or not config.enabled:
        return None
    return {"schedule": config.schedule, "namespace": MAINTENANCE_NAMESPACE,
            "applications": applications(config, template, registry)}


def maintained_namespaces(compute: Any) -> tuple[str, ...]:
    """The namespaces the site maintains (`compute.iceberg_maintenance.targets`), none while maintenance is off: StorageCluster
    makes the maintenance principal for them."""
    config = compute.iceberg_maintenance
    if config is None or not config.enabled:
        return ()
    return tuple(sorted({t.namespace for t in config.targets}))


ADMISSION_POLICY = "fab-iceberg-maintenance-applications"
"""The ValidatingAdmissionPolicy on compute that admits, in MAINTENANCE_NAMESPACE, the platform's applications only."""
SUBMITTER_PREFIX = f"system:serviceaccount:{AIRFLOW_NAMESPACE}:"
FREE_POD_FIELDS = ("labels", "annotations")
"""What a submitter adds to the driver and executors of an application (Airflow's operator labels them with its task)."""
DENIED_SUBMITTER = (f"only Airflow's ServiceAccounts (the {DAG_ID} DAG) submit SparkApplications in {MAINTENANCE_NAMESPACE}")
DENIED_POD_CHANGE = f"a pod's spec in {MAINTENANCE_NAMESPACE} does not change after it is created"


def denied_field(path: str) -> str:
    """The refusal of an application whose `path` is not the platform's."""
    return (f"{path} of a SparkApplication in {MAINTENANCE_NAMESPACE} must be the platform's maintenance application's "
            f"(components/iceberg_maintenance.py), which runs as the maintenance principal")


def cel_literal(value: Any) -> str:
    """`value` (JSON data) as a CEL literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(cel_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel_literal(k)}: {cel_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no CEL literal for {value!r}")


def _pinned(path: str, shipped: dict[str, Any], free: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """Validations: the map at `path` has the keys of `shipped` (and `free` ones) only, each with its shipped value."""
    keys = sorted({*shipped, *free})
    checks = [{"expression": f"{path}.all(k, k in {cel_literal(keys)})", "message": denied_field(f"the fields of {path.removeprefix('object.')}")}]
    for key, value in shipped.items():
        if key in free or isinstance(value, dict) and key in ("driver", "executor"):
            continue
        checks.append({"expression": f"{cel_literal(key)} in {path} && {path}[{cel_literal(key)}] == {cel_literal(value)}",
                       "message": denied_field(f"{path.removeprefix('object.')}.{key}")})
    return checks


def admission_policy(apps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """ADMISSION_POLICY's spec for the site's applications (`applications`), which differ in their arguments alone."""
    specs = [app["spec"] for _, app in sorted(apps.items())]
    base = {k: v for k, v in specs[0].items() if k != "arguments"}
    assert all({k: v for k, v in s.items() if k != "arguments"} == base for s in specs), "applications differ beyond arguments"
    arguments = [s["arguments"] for s in specs]
    app_checks = [
        {"expression": f"request.userInfo.username.startsWith('{SUBMITTER_PREFIX}')", "message": DENIED_SUBMITTER},
        *_pinned("object.spec", base, ("arguments",)),
        {"expression": f"'arguments' in object.spec && object.spec.arguments in {cel_literal(arguments)}",
         "message": denied_field("spec.arguments")},
        *_pinned("object.spec.driver", base["driver"], FREE_POD_FIELDS),
        *_pinned("object.spec.executor", base["executor"], FREE_POD_FIELDS),
    ]
    application = "request.resource.resource == 'sparkapplications'"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": ["sparkoperator.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
             "resources": ["sparkapplications"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]},
        ]},
        "matchConditions": [
            {"name": "maintenance-namespace", "expression": f"request.namespace == '{MAINTENANCE_NAMESPACE}'"},
            # An update that leaves the spec alone (labels, finalizers, the operator's bookkeeping) is not this policy's.
            {"name": "spec-written", "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec"},
        ],
        "validations": [
            {"expression": f"{application} || object.spec == oldObject.spec", "message": DENIED_POD_CHANGE},
            *({"expression": f"!({application}) || ({check['expression']})", "message": check["message"]} for check in app_checks),
        ],
    }
