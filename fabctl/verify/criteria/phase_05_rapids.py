"""Phase 05's Spark RAPIDS check (`05-spark-rapids-<cluster>`): on each GPU cluster with `gpu.<cluster>.spark_rapids`,
the very SparkApplication Airflow submits there (components/spark_rapids.py `spark_rapids_application`: Kueue's labels,
the training pool, the team's credentials, the RAPIDS plugin sized from config) runs a small aggregation with one
executor, and the RAPIDS plugin takes the query: its executed plan has Gpu operators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.engines._spark_trust import SparkTrust
from components.kueue import team_namespace
from components.registry import Registry
from components.spark_rapids import spark_rapids_application
from components.storage import clients_catalog_uri
from fabctl.verify.criteria.blocks import Site, _dns, _meta
from fabctl.verify.model import Criterion, Judgement, Manifest, Step

APPLICATION = "fab-verify-rapids"
"""The SparkApplication's name (its driver pod is `<name>-driver`; Spark's driver Service name must stay under 63)."""
SCRIPT_CONFIG_MAP = "fab-verify-rapids-script"
SCRIPT_VOLUME = "fab-verify-rapids"
SCRIPT_DIR = "/opt/fab-verify"
SCRIPT_FILE = "rapids.py"
ROWS = 1_000_000
"""The aggregation's input: ids 0 .. ROWS-1, summed in GROUPS groups (id % GROUPS)."""
GROUPS = 10
TOTAL = ROWS * (ROWS - 1) // 2
"""The sum of the groups' sums: every id once."""

SCRIPT = f'''"""fabctl verify 05-spark-rapids: a small aggregation; prints whether the RAPIDS plugin took it (Gpu operators in the
executed plan), how many rows it gave and their total, as FAB-RESULT lines on the driver's stdout."""
import re

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = SparkSession.builder.appName("{APPLICATION}").getOrCreate()
try:
    df = spark.range(0, {ROWS}).groupBy((F.col("id") % {GROUPS}).alias("k")).agg(F.sum("id").alias("total"))
    rows = df.collect()
    # After the action, an adaptive plan prints its final plan first, then the initial (CPU) one: only the final counts.
    plan = df._jdf.queryExecution().executedPlan().toString().split("== Initial Plan ==")[0]
    operators = sorted(set(re.findall(r"\\bGpu[A-Z][A-Za-z]*", plan)))
    print("FAB-RESULT gpu_plan=" + ("true" if operators else "false"), flush=True)
    print("FAB-RESULT gpu_operators=" + (",".join(operators) or "none"), flush=True)
    print(f"FAB-RESULT rows={{len(rows)}}", flush=True)
    print(f"FAB-RESULT total={{sum(row['total'] for row in rows)}}", flush=True)
finally:
    spark.stop()
'''
"""The driver's script, mounted at SCRIPT_DIR from SCRIPT_CONFIG_MAP."""


def rapids_team(site: Site, cluster: str) -> str | None:
    """The team whose namespace on `cluster` runs the check: the acceptance team if it has a GPU quota there, else the
    first team that has one; None when no team does."""
    quotas = site.config.team_quotas()
    with_quota = [team for team, clusters in quotas.items() if cluster in clusters and clusters[cluster].gpus > 0]
    if site.team() in with_quota:
        return site.team()
    return with_quota[0] if with_quota else None


def application(site: Site, cluster: str, team: str, cid: str) -> Manifest:
    """The SparkApplication Airflow would submit to `team`'s namespace on `cluster`, with one executor, running SCRIPT
    (Python, `local://` from the ConfigMap mounted in driver and executor beside the template's volumes)."""
    config = site.config
    spec = config.gpu[cluster].spark_rapids
    assert spec is not None
    catalog = clients_catalog_uri(config.domain, config.storage.polaris, config.global_services_enabled())
    trust = SparkTrust.of(site.ca, config.storage.object_store.tls)
    # As __main__.py gives it to the program: the registry's CA, else the site's, for the JVMs that resolve packages.
    registry = Registry.of(config.registry, config.ca_bundle)
    app = spark_rapids_application(spec, catalog, executors=1, registry=registry, trust=trust)
    meta = _meta(APPLICATION, team_namespace(team), cid)
    meta["labels"].update(app["metadata"].get("labels", {}))
    mount = {"name": SCRIPT_VOLUME, "mountPath": SCRIPT_DIR, "readOnly": True}
    body: dict[str, Any] = app["spec"]
    body["volumes"] = [*body.get("volumes", []), {"name": SCRIPT_VOLUME, "configMap": {"name": SCRIPT_CONFIG_MAP}}]
    for role in ("driver", "executor"):
        body[role]["volumeMounts"] = [*body[role].get("volumeMounts", []), dict(mount)]
    # The plugin says in the driver's log why an operator stays on the CPU (`... cannot run on GPU because ...`).
    body["sparkConf"]["spark.rapids.sql.explain"] = "NOT_ON_GPU"
    # No pythonVersion: the operator then passes none, and Spark 3 runs Python 3 (the image's python3).
    return {**app, "metadata": meta,
            "spec": {**body, "type": "Python", "mainApplicationFile": f"local://{SCRIPT_DIR}/{SCRIPT_FILE}"}}


def spark_rapids(site: Site, cluster: str) -> Criterion | tuple[str, str]:
    """On `cluster`, in the team's namespace, the SparkApplication Airflow submits (`application`) runs SCRIPT: it
    completes, the RAPIDS plugin took the query (Gpu operators in the executed plan), and it gives GROUPS rows summing
    to TOTAL."""
    cid = _dns("05-spark-rapids", cluster)
    team = rapids_team(site, cluster)
    if team is None:
        return (cid, (f"no team has a GPU quota on {cluster} (training.quotas.<team>.{cluster}): a SparkApplication is "
                      "admitted against its team's training quota"))
    namespace = team_namespace(team)
    script = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(SCRIPT_CONFIG_MAP, namespace, cid),
              "data": {SCRIPT_FILE: SCRIPT}}
    timeout = site.acceptance.timeout_sec
    step = Step(cluster, (script, application(site, cluster, team, cid)), ("SparkApplication", APPLICATION), timeout)
    where = f"{cluster}: team {team}'s SparkApplication in {namespace}"

    def judge(results: Mapping[str, str]) -> Judgement:
        if results.get("0.succeeded") != "true":
            return False, (f"{where} failed (FAILED or SUBMISSION_FAILED): its status.applicationState.errorMessage and its "
                           "driver's log say why")
        plan = results.get("0.gpu_plan")
        if plan is None:
            return False, f"{where} completed, but its driver reported no result"
        if plan != "true":
            return False, (f"{where}: the RAPIDS plugin did not take the query: its executed plan has no Gpu operator; the "
                           "driver's log says why ('cannot run on GPU because' lines), and the application's sparkConf must "
                           "hold spark.plugins com.nvidia.spark.SQLPlugin and spark.rapids.sql.enabled true")
        rows, total = results.get("0.rows"), results.get("0.total")
        if (rows, total) != (str(GROUPS), str(TOTAL)):
            return False, (f"{where}: the aggregation gave {rows or 'no'} rows totalling {total or 'nothing'}; {GROUPS} rows "
                           f"totalling {TOTAL} expected")
        return True, (f"{where} ran on the GPU ({results.get('0.gpu_operators', 'Gpu operators')}): {GROUPS} rows totalling "
                      f"{TOTAL}")

    return Criterion(5, cid, f"Spark RAPIDS on {cluster}: the SparkApplication Airflow submits runs on the GPU in {namespace}",
                     (step,), judge, f"completes; Gpu operators in the plan; {GROUPS} rows totalling {TOTAL}")
