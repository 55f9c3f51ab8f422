"""Phase 05's Spark RAPIDS check (fabctl/verify/criteria/phase_05_rapids.py, docs/acceptance.md): the SparkApplication
Airflow submits, with one executor, in a team's namespace, running a script whose driver says whether the RAPIDS plugin
took the query; the runner waits for the application's state and reads its driver's log; the judge's exact verdicts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from airgap_cases import with_registry
from kube_stub import CORE, FakeApi, serve
from schemas import CrdSchemas, schema_errors
from small_site import SITE_CA, full_site

from components.config import parse_site
from components.kube import restricted_pod_security_context, restricted_security_context
from components.kueue import DEFAULT_WORKLOAD_PRIORITY, LOCAL_QUEUE, PRIORITY_LABEL, QUEUE_LABEL
from fabctl.verify.criteria import criteria
from fabctl.verify.criteria.blocks import VERIFY_LABEL, Site
from fabctl.verify.criteria.phase_05_rapids import APPLICATION, GROUPS, SCRIPT, TOTAL, spark_rapids
from fabctl.verify.model import Criterion
from fabctl.verify.report import FAIL, PASS
from fabctl.verify.runner import Runner

FIXTURES = Path(__file__).parents[1] / "fixtures" / "verify" / "spark"
CID = "05-spark-rapids-gpu-train"
APP_PATH = f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/team-yield/sparkapplications/{APPLICATION}"
DRIVER = f"spark-role=driver,sparkoperator.k8s.io/app-name={APPLICATION}"
PASSING = (f"FAB-RESULT gpu_plan=true\nFAB-RESULT gpu_operators=GpuHashAggregate,GpuRange\nFAB-RESULT rows={GROUPS}\n"
           f"FAB-RESULT total={TOTAL}\n")


def rapids_site(**changes: Any) -> dict[str, Any]:
    """full_site() with Spark RAPIDS on gpu-train (team yield has 8 GPUs there, fdc none)."""
    raw = full_site()
    raw["gpu"]["gpu-train"]["spark_rapids"] = {}
    raw.update(changes)
    return raw


@pytest.fixture(scope="module")
def site() -> Site:
    return Site(parse_site(rapids_site()))


@pytest.fixture(scope="module")
def check(site) -> Criterion:
    built = spark_rapids(site, "gpu-train")
    assert isinstance(built, Criterion)
    return built


@pytest.fixture(scope="module")
def crds(crd_dir) -> CrdSchemas:
    return CrdSchemas(crd_dir)


def app_of(check: Criterion) -> dict[str, Any]:
    (app,) = [o for o in check.steps[0].objects if o["kind"] == "SparkApplication"]
    return app


# --- the objects --------------------------------------------------------------------------------------------------------

def test_phase_05_checks_spark_rapids_on_each_cluster_that_runs_it(site):
    assert [c.id for c in criteria(site.config, 5) if c.id.startswith("05-spark-rapids")] == [CID]


def test_every_object_validates_strictly(check, crds):
    assert {o["kind"]: schema_errors(o, crds) for o in check.steps[0].objects} == {"ConfigMap": [], "SparkApplication": []}


def test_every_object_validates_strictly_with_a_registry_and_the_sites_ca(crds):
    raw = with_registry(rapids_site(ca_bundle=SITE_CA))
    built = spark_rapids(Site(parse_site(raw)), "gpu-train")
    assert isinstance(built, Criterion)
    app = app_of(built)
    assert [v["name"] for v in app["spec"]["volumes"]] == ["tmp", "spark-maven", "spark-trust", "fab-verify-rapids"]
    assert {o["kind"]: schema_errors(o, crds) for o in built.steps[0].objects} == {"ConfigMap": [], "SparkApplication": []}


def test_the_application_is_queued_in_the_teams_namespace_as_airflow_submits_it(check):
    meta = app_of(check)["metadata"]
    assert meta == {"name": APPLICATION, "namespace": "team-yield", "labels": {
        VERIFY_LABEL: CID, QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: DEFAULT_WORKLOAD_PRIORITY}}
    assert check.steps[0].cluster == "gpu-train"
    assert check.steps[0].decides == ("SparkApplication", APPLICATION)


def test_driver_and_executor_run_restricted_on_training_nodes_with_the_teams_keys(check):
    spec = app_of(check)["spec"]
    for role in ("driver", "executor"):
        pod = spec[role]
        assert pod["securityContext"] == restricted_security_context(185) | {"readOnlyRootFilesystem": False}, role
        assert pod["podSecurityContext"] == restricted_pod_security_context(runAsUser=185, fsGroup=185), role
        assert pod["nodeSelector"] == {"fab.internal/gpu-pool": "training"}, role
        assert pod["envFrom"] == [{"secretRef": {"name": "s3-training"}}, {"secretRef": {"name": "polaris-training"}}], role


def test_one_executor_with_the_configured_gpus_runs_the_script_from_the_config_map(check):
    spec = app_of(check)["spec"]
    assert (spec["executor"]["instances"], spec["executor"]["gpu"]) == (1, {"name": "nvidia.com/gpu", "quantity": 1})
    assert (spec["type"], spec["mainApplicationFile"]) == ("Python", "local:///opt/fab-verify/rapids.py")
    assert spec["volumes"][-1] == {"name": "fab-verify-rapids", "configMap": {"name": "fab-verify-rapids-script"}}
    mount = {"name": "fab-verify-rapids", "mountPath": "/opt/fab-verify", "readOnly": True}
    assert spec["driver"]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}, mount]
    assert spec["executor"]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}, mount]
    (config_map,) = [o for o in check.steps[0].objects if o["kind"] == "ConfigMap"]
    assert (config_map["metadata"]["namespace"], config_map["data"]) == ("team-yield", {"rapids.py": SCRIPT})


def test_the_application_reads_the_catalog_the_sites_clients_call(check):
    conf = app_of(check)["spec"]["sparkConf"]
    assert conf["spark.sql.catalog.fab.uri"] == "http://polaris-rest.polaris.svc:8181/api/catalog"
    assert (conf["spark.plugins"], conf["spark.rapids.sql.enabled"]) == ("com.nvidia.spark.SQLPlugin", "true")


def test_the_acceptance_team_runs_it_where_it_has_a_gpu_quota():
    raw = rapids_site()
    raw["gpu"]["gpu"]["spark_rapids"] = {}
    raw["acceptance"] = {"team": "yield"}
    built = spark_rapids(Site(parse_site(raw)), "gpu")
    assert isinstance(built, Criterion)
    assert app_of(built)["metadata"]["namespace"] == "team-yield"


def test_the_first_team_with_a_gpu_quota_runs_it_when_the_acceptance_team_has_none_there():
    raw = rapids_site()
    raw["acceptance"] = {"team": "fdc"}  # fdc has no quota on gpu-train
    built = spark_rapids(Site(parse_site(raw)), "gpu-train")
    assert isinstance(built, Criterion)
    assert app_of(built)["metadata"]["namespace"] == "team-yield"


def test_fails_when_no_team_has_a_gpu_quota_on_the_cluster():
    raw = rapids_site()
    raw["training"]["quotas"] = {"yield": {"gpu": {"gpus": 4}}, "fdc": {"gpu": {"gpus": 4}}}
    assert spark_rapids(Site(parse_site(raw)), "gpu-train") == (CID, (
        "no team has a GPU quota on gpu-train (training.quotas.<team>.gpu-train): a SparkApplication is admitted against "
        "its team's training quota"))


# --- the script ---------------------------------------------------------------------------------------------------------

FAKE_PYSPARK = '''
import os


class Column:
    def __init__(self, of):
        self.of = of

    def __mod__(self, n):
        return Column(lambda row: self.of(row) % n)

    def alias(self, name):
        self.name = name
        return self


class functions:
    col = staticmethod(lambda name: Column(lambda row: row[name]))

    @staticmethod
    def sum(name):
        return Column(lambda rows: sum(r[name] for r in rows))


class Frame:
    def __init__(self, rows):
        self.rows = rows
        self._jdf = self

    def groupBy(self, key):
        self.key = key
        return self

    def agg(self, total):
        groups = {}
        for row in self.rows:
            groups.setdefault(self.key.of(row), []).append(row)
        return Frame([{self.key.name: k, total.name: total.of(v)} for k, v in sorted(groups.items())])

    def collect(self):
        return self.rows

    def queryExecution(self):
        return self

    def executedPlan(self):
        return self

    def toString(self):
        with open(os.environ["FAKE_PLAN"]) as plan:
            return plan.read()


class SparkSession:
    class builder:
        @staticmethod
        def appName(name):
            return SparkSession.builder

        @staticmethod
        def getOrCreate():
            return SparkSession()

    def range(self, start, end):
        return Frame([{"id": i} for i in range(start, end)])

    def stop(self):
        print("stopped")
'''


def run_script(tmp_path: Path, plan: str) -> list[str]:
    """SCRIPT's output against a fake `pyspark` that computes the aggregation in Python and returns `plan` (a fixture
    file) as the executed plan's string."""
    package = tmp_path / "pyspark" / "sql"
    package.mkdir(parents=True)
    (tmp_path / "pyspark" / "__init__.py").write_text("")
    (package / "__init__.py").write_text(FAKE_PYSPARK)
    (tmp_path / "rapids.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(tmp_path / "rapids.py")], capture_output=True, text=True, timeout=60, check=False,
                          env={"PYTHONPATH": str(tmp_path), "FAKE_PLAN": str(FIXTURES / plan)})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_script_compiles():
    compile(SCRIPT, "rapids.py", "exec")


def test_the_script_reports_the_gpu_operators_of_the_final_plan(tmp_path):
    assert run_script(tmp_path, "adaptive-final-gpu.txt") == [
        "FAB-RESULT gpu_plan=true",
        ("FAB-RESULT gpu_operators=GpuColumnarExchange,GpuColumnarToRow,GpuHashAggregate,GpuProject,GpuRange,"
         "GpuShuffleCoalesce"),
        f"FAB-RESULT rows={GROUPS}", f"FAB-RESULT total={TOTAL}", "stopped"]


def test_the_script_reports_no_gpu_plan_when_the_query_ran_on_the_cpu(tmp_path):
    assert run_script(tmp_path, "adaptive-final-cpu.txt")[:2] == ["FAB-RESULT gpu_plan=false", "FAB-RESULT gpu_operators=none"]


def test_the_script_ignores_gpu_operators_of_the_initial_plan(tmp_path):
    assert run_script(tmp_path, "adaptive-final-cpu-initial-gpu.txt")[:1] == ["FAB-RESULT gpu_plan=false"]


# --- the judge ----------------------------------------------------------------------------------------------------------

WHERE = "gpu-train: team yield's SparkApplication in team-yield"


def verdict(check: Criterion, **results: str) -> tuple[bool, str]:
    return check.judge({f"0.{k}": v for k, v in results.items()})


def test_passes_when_the_query_ran_on_the_gpu_and_gave_the_rows(check):
    assert verdict(check, succeeded="true", gpu_plan="true", gpu_operators="GpuHashAggregate,GpuRange", rows=str(GROUPS),
                   total=str(TOTAL)) == (True, f"{WHERE} ran on the GPU (GpuHashAggregate,GpuRange): 10 rows totalling {TOTAL}")


def test_fails_when_the_application_fails(check):
    assert verdict(check, succeeded="false", gpu_plan="true") == (False, (
        f"{WHERE} failed (FAILED or SUBMISSION_FAILED): its status.applicationState.errorMessage and its driver's log say why"))


def test_fails_when_the_driver_reports_nothing(check):
    assert verdict(check, succeeded="true") == (False, f"{WHERE} completed, but its driver reported no result")


def test_fails_when_the_rapids_plugin_did_not_take_the_query(check):
    assert verdict(check, succeeded="true", gpu_plan="false", rows=str(GROUPS), total=str(TOTAL)) == (False, (
        f"{WHERE}: the RAPIDS plugin did not take the query: its executed plan has no Gpu operator; the driver's log says "
        "why ('cannot run on GPU because' lines), and the application's sparkConf must hold spark.plugins "
        "com.nvidia.spark.SQLPlugin and spark.rapids.sql.enabled true"))


def test_fails_when_the_aggregation_gives_other_rows(check):
    assert verdict(check, succeeded="true", gpu_plan="true", rows="9", total=str(TOTAL)) == (False, (
        f"{WHERE}: the aggregation gave 9 rows totalling {TOTAL}; 10 rows totalling {TOTAL} expected"))


# --- the runner ---------------------------------------------------------------------------------------------------------

SPARK_GROUP = {"sparkoperator.k8s.io/v1beta2": [{"name": "sparkapplications", "kind": "SparkApplication", "namespaced": True}]}


def state(name: str) -> dict[str, Any]:
    return {"applicationState": {"state": name}}


@pytest.fixture
def api() -> FakeApi:
    """gpu-train with the Spark operator and team-yield; the application runs, then completes, its driver passing."""
    return FakeApi(groups={"v1": [*CORE, {"name": "configmaps", "kind": "ConfigMap", "namespaced": True}], **SPARK_GROUP},
                   namespaces={"team-yield"}, statuses={APP_PATH: [{}, state("SUBMITTED"), state("RUNNING"), state("COMPLETED")]},
                   pods={DRIVER: [f"{APPLICATION}-driver"]}, logs={f"{APPLICATION}-driver": PASSING})


def run(api: FakeApi, tmp_path: Path, check: Criterion, clock: list[float] | None = None):
    now = clock if clock is not None else [0.0]
    kubeconfig = tmp_path / "kubeconfig"
    with serve(api, kubeconfig, {"site-t-gpu-train": "site-t-gpu-train"}):
        runner = Runner({"gpu-train": "site-t-gpu-train"}, kubeconfig=str(kubeconfig), poll_sec=5, clock=lambda: now[0],
                        sleep=lambda s: now.__setitem__(0, now[0] + s))
        (outcome,) = runner.run([check])
    return outcome


def test_the_runner_waits_for_completed_and_reads_the_drivers_log(api, tmp_path, check):
    outcome = run(api, tmp_path, check)
    assert (outcome.status, outcome.results["0.succeeded"], outcome.results["0.gpu_plan"]) == (PASS, "true", "true")
    assert [r.query["labelSelector"][0] for r in api.requests if r.path.endswith("/pods")] == [DRIVER]
    assert outcome.seconds == 15.0


@pytest.mark.parametrize("failed", ["FAILED", "SUBMISSION_FAILED"])
def test_fails_when_the_application_ends_in(failed, api, tmp_path, check):
    api.statuses[APP_PATH] = [state("RUNNING"), state(failed)]
    outcome = run(api, tmp_path, check)
    assert (outcome.status, outcome.results["0.succeeded"]) == (FAIL, "false")


def test_fails_when_the_application_does_not_finish_within_the_timeout(api, tmp_path, check):
    api.statuses[APP_PATH] = [state("RUNNING")]
    outcome = run(api, tmp_path, check)
    assert (outcome.status, outcome.message) == (FAIL, (
        f"SparkApplication team-yield/{APPLICATION} on cluster gpu-train (context site-t-gpu-train) did not finish within "
        "600 s"))


def test_fails_when_the_cluster_has_no_spark_operator(api, tmp_path, check):
    del api.groups["sparkoperator.k8s.io/v1beta2"]
    outcome = run(api, tmp_path, check)
    assert (outcome.status, outcome.message) == (FAIL, (
        "SparkApplication sparkoperator.k8s.io/v1beta2 is not served by cluster gpu-train (context site-t-gpu-train): the "
        "Spark operator is not installed there"))
    assert api.calls("PATCH", "POST") == []


def test_the_runner_deletes_the_application_and_its_script(api, tmp_path, check):
    run(api, tmp_path, check)
    assert api.calls("DELETE") == [("DELETE", APP_PATH),
                                   ("DELETE", "/api/v1/namespaces/team-yield/configmaps/fab-verify-rapids-script")]
