"""The Polaris catalog's Spark settings resolve, as the JVMs that read them resolve them, from the environment the pod's
envFrom gives it (components/engines/spark.py `spark_conf`).

Spark hands `spark.sql.catalog.<name>.*` to Iceberg as written; Iceberg's REST catalog (1.10 EnvironmentUtil.resolveAll)
replaces a WHOLE value `env:NAME` by that variable and drops the option when it is unset; Hadoop's Configuration
(3.3 substituteVars) expands `${env.NAME}` inside `spark.hadoop.*` values and leaves what it cannot resolve as written.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from helpers import render_small
from small_site import small_site

from components.constants import CATALOG_CONF

COMPUTE = "site-t-compute"
ICEBERG_ENV = "env:"
HADOOP_ENV = re.compile(r"\$\{env\.([A-Za-z_][A-Za-z0-9_]*)\}")
UNRESOLVED = re.compile(r"\$\{|^env:")


def iceberg_options(conf: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """The catalog's options as Iceberg's RESTSessionCatalog sees them (EnvironmentUtil.resolveAll)."""
    options = {k[len(CATALOG_CONF) + 1:]: v for k, v in conf.items() if k.startswith(CATALOG_CONF + ".")}
    resolved = {}
    for name, value in options.items():
        if value.startswith(ICEBERG_ENV):
            if value[len(ICEBERG_ENV):] in env:
                resolved[name] = env[value[len(ICEBERG_ENV):]]
        else:
            resolved[name] = value
    return resolved


def hadoop_options(conf: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    """The `spark.hadoop.*` settings as Hadoop's Configuration.get returns them."""
    return {k: HADOOP_ENV.sub(lambda m: env.get(m.group(1), m.group(0)), v) for k, v in conf.items() if k.startswith("spark.hadoop.")}


def referenced(conf: dict[str, str]) -> set[str]:
    """Every environment variable the settings name, in either syntax."""
    names = {v[len(ICEBERG_ENV):] for k, v in conf.items() if k.startswith(CATALOG_CONF + ".") and v.startswith(ICEBERG_ENV)}
    return names | {m for k, v in conf.items() if k.startswith("spark.hadoop.") for m in HADOOP_ENV.findall(v)}


def environment(plan: Any, namespace: str, env_from: list[dict[str, Any]]) -> dict[str, str]:
    """What a pod's envFrom gives it: every key of the Secrets it names, in its namespace (values stand in)."""
    names = [e["secretRef"]["name"] for e in env_from]
    secrets = {s["metadata"]["name"]: s for s in plan.objects("Secret", COMPUTE) if s["metadata"]["namespace"] == namespace}
    return {key: f"<{name}/{key}>" for name in names for key in secrets[name].get("stringData", {})}


def unresolved(conf: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    options = {**{f"{CATALOG_CONF}.{k}": v for k, v in iceberg_options(conf, env).items()}, **hadoop_options(conf, env)}
    missing = {f"{CATALOG_CONF}.{name}": "(dropped)" for name in
               {k[len(CATALOG_CONF) + 1:] for k in conf if k.startswith(CATALOG_CONF + ".")} - set(iceberg_options(conf, env))}
    return {**missing, **{k: v for k, v in options.items() if UNRESOLVED.search(v)}}


def _airflow_template(plan: Any) -> dict[str, Any]:
    (config,) = [c for c in plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "spark-application"]
    return yaml.safe_load(config["data"]["sparkapplication.yaml"])


def test_the_spark_application_templates_catalog_settings_resolve_from_its_secrets(small_plan):
    app = _airflow_template(small_plan)
    spec, namespace = app["spec"], app["metadata"]["namespace"]
    for role in ("driver", "executor"):
        env = environment(small_plan, namespace, spec[role]["envFrom"])
        assert (unresolved(spec["sparkConf"], env), referenced(spec["sparkConf"]) - set(env)) == ({}, set()), role


def test_the_spark_application_template_names_the_credential_as_one_variable(small_plan):
    conf = _airflow_template(small_plan)["spec"]["sparkConf"]
    assert (conf[f"{CATALOG_CONF}.credential"], conf[f"{CATALOG_CONF}.warehouse"], conf[f"{CATALOG_CONF}.s3.endpoint"],
            conf["spark.hadoop.fs.s3a.endpoint"]) == (
        "env:POLARIS_CREDENTIAL", "env:POLARIS_WAREHOUSE", "env:AWS_ENDPOINT_URL_S3", "${env.AWS_ENDPOINT_URL_S3}")


def test_the_spark_connect_servers_defaults_resolve_from_its_secrets(small_plan):
    (config,) = [c for c in small_plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "spark-defaults"]
    conf = dict(line.split(" ", 1) for line in config["data"]["spark-defaults.conf"].splitlines() if line)
    (deployment,) = [d for d in small_plan.objects("Deployment", COMPUTE) if d["metadata"]["name"] == "spark-connect"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = environment(small_plan, deployment["metadata"]["namespace"], container["envFrom"])
    assert (unresolved(conf, env), referenced(conf) - set(env)) == ({}, set())


@pytest.fixture(scope="module")
def maintained_plan() -> Any:
    site = small_site()
    site["compute"]["iceberg_maintenance"] = {"targets": [{"namespace": "fdc"}]}
    return render_small(site)


def test_the_maintenance_applications_catalog_settings_resolve_from_their_secrets(maintained_plan):
    (config,) = [c for c in maintained_plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "platform-dags"]
    apps = json.loads(config["data"]["platform.json"])["iceberg_maintenance"]["applications"]
    found = {}
    for task, app in apps.items():
        spec = app["spec"]
        for role in ("driver", "executor"):
            env = environment(maintained_plan, app["metadata"]["namespace"], spec[role]["envFrom"])
            found[task, role] = (unresolved(spec["sparkConf"], env), referenced(spec["sparkConf"]) - set(env))
    assert found == {key: ({}, set()) for key in found}


def test_the_resolver_reports_a_dollar_brace_reference_as_unresolved():
    # The defect these tests guard against: `${env:NAME}` reaches Iceberg (and Hadoop) as written.
    conf = {f"{CATALOG_CONF}.warehouse": "${env:W}", "spark.hadoop.fs.s3a.endpoint": "${env:E}"}
    assert unresolved(conf, {"W": "w", "E": "e"}) == {f"{CATALOG_CONF}.warehouse": "${env:W}", "spark.hadoop.fs.s3a.endpoint": "${env:E}"}
