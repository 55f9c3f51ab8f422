"""The SQL the program ships, parsed by a real SQL parser in its engine's dialect: sqlglot (requirements-dev.txt), on the
statements as they run (the StarRocks setup script run by bash against a recording `mysql`; the Iceberg maintenance
job's and the feature job's statements as their code builds them), asserting what each statement touches.

Where sqlglot has no grammar for a statement it falls back to an opaque `Command` (StarRocks' CREATE STORAGE VOLUME,
SET ... AS DEFAULT STORAGE VOLUME, CREATE EXTERNAL CATALOG, SET PASSWORD; Spark's CALL and ALTER TABLE ... CREATE TAG):
there the statement is only split and tokenized (quotes, parentheses) and the parts it has a grammar for are parsed
(PROPERTIES lists as tuples of `key = value`, a CALL's arguments as a Spark function call with named arguments). That a
procedure, property key or StarRocks command exists in the pinned engine is not shown here (docs/architecture.md,
"Offline proof")."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

import components
from components import iceberg_maintenance_job as job
from components.config.schema.maintenance import IcebergMaintenanceConfig

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to Command" warnings: asserted below instead

ENVIRONMENT = {
    "STARROCKS_HOST": "starrocks-fe", "STARROCKS_ROOT_PASSWORD": "rootPass42", "AWS_ENDPOINT_URL_S3": "https://s3.site-t.fab.internal",
    "AWS_REGION": "site-t", "OLAP_LOCATION": "s3://fab-olap/starrocks", "AWS_ACCESS_KEY_ID": "AKEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "se/cr+et", "POLARIS_WAREHOUSE": "fab", "POLARIS_CLIENT_ID": "starrocks-id",
    "POLARIS_CLIENT_SECRET": "starrocksSecret",
}
"""The setup Job's environment (its Secrets' keys) with stand-in values."""

RECORDING_MYSQL = """#!/bin/sh
# A StarRocks FE whose root has no password until SET PASSWORD: records each statement text it is sent.
with_password=no
statement=
while [ $# -gt 0 ]; do
  case "$1" in -p*) with_password=yes ;; -e) shift; statement="$1" ;; esac
  shift
done
[ -n "$statement" ] || statement=$(cat)
if [ "$with_password" = yes ] && [ ! -e "$STATE/password-set" ]; then exit 1; fi
case "$statement" in "SET PASSWORD"*) touch "$STATE/password-set" ;; esac
[ "$statement" = "SELECT 1" ] || printf '%s\\n-- sent --\\n' "$statement" >> "$STATE/statements"
"""


def starrocks_statements(script: str, tmp_path: Path) -> list[exp.Expression]:
    """The statements the setup script sends on a first run, in order, as sqlglot parses them (StarRocks dialect)."""
    (tmp_path / "bin").mkdir()
    mysql = tmp_path / "bin" / "mysql"
    mysql.write_text(RECORDING_MYSQL)
    mysql.chmod(0o755)
    (tmp_path / "setup.sh").write_text(script)
    env = {**ENVIRONMENT, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "STATE": str(tmp_path)}
    run = subprocess.run(["bash", str(tmp_path / "setup.sh")], env=env, capture_output=True, text=True, check=False, timeout=60)
    assert (run.returncode, run.stderr) == (0, "")
    sent = (tmp_path / "statements").read_text().split("\n-- sent --\n")
    return [s for text in sent if text.strip() for s in sqlglot.parse(text, read="starrocks") if s is not None]


def properties(text: str) -> dict[str, str]:
    """A StarRocks `( "key" = "value", ... )` list, parsed."""
    parsed = sqlglot.parse_one(text, read="starrocks")
    pairs = parsed.expressions if isinstance(parsed, exp.Tuple) else [parsed]
    assert all(isinstance(p, exp.EQ) and p.this.is_string and p.expression.is_string for p in pairs), text
    keys = [p.this.name for p in pairs]
    assert len(keys) == len(set(keys)), f"a key is set twice: {text}"
    return {p.this.name: p.expression.name for p in pairs}


def _clause(command: exp.Command, keyword: str) -> str:
    """The parenthesized list after `keyword` in a Command's text, found by sqlglot's tokenizer (quotes respected)."""
    tokens = sqlglot.tokenize(command.expression, read="starrocks")
    after = next(i for i, t in enumerate(tokens) if t.text.upper() == keyword)
    start = next(i for i, t in enumerate(tokens) if i > after and t.text == "(")
    depth, end = 0, start
    for end, token in enumerate(tokens[start:], start):
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if depth == 0:
            break
    return command.expression[tokens[start].start:tokens[end].end + 1]


@pytest.fixture(scope="module")
def setup_sql(small_plan, tmp_path_factory) -> list[exp.Expression]:
    (setup,) = [c for c in small_plan.objects("ConfigMap", "site-t-compute") if c["metadata"]["name"] == "starrocks-setup"]
    return starrocks_statements(setup["data"]["setup.sh"], tmp_path_factory.mktemp("starrocks"))


def test_the_starrocks_setup_sends_four_statements_one_per_step(setup_sql):
    assert [(type(s).__name__, s.this, " ".join(s.expression.split()[:4])) for s in setup_sql] == [
        ("Command", "SET", "PASSWORD FOR 'root' ="),
        ("Command", "CREATE", "STORAGE VOLUME IF NOT"),
        ("Command", "SET", "fab_olap AS DEFAULT STORAGE"),
        ("Command", "CREATE", "EXTERNAL CATALOG IF NOT"),
    ]


def test_the_storage_volume_is_on_the_olap_location_with_the_engines_keys(setup_sql):
    volume = setup_sql[1]
    assert sqlglot.parse_one(_clause(volume, "LOCATIONS"), read="starrocks").name == "s3://fab-olap/starrocks"
    assert properties(_clause(volume, "PROPERTIES")) == {
        "aws.s3.endpoint": "https://s3.site-t.fab.internal", "aws.s3.enable_path_style_access": "true", "aws.s3.region": "site-t",
        "enabled": "true", "aws.s3.use_aws_sdk_default_behavior": "false", "aws.s3.use_instance_profile": "false",
        "aws.s3.access_key": "AKEXAMPLE", "aws.s3.secret_key": "se/cr+et",
    }


def test_the_catalog_is_polaris_over_rest_with_vended_credentials(setup_sql, small_plan):
    catalog = setup_sql[3]
    assert catalog.expression.split()[:5] == ["EXTERNAL", "CATALOG", "IF", "NOT", "EXISTS"]
    assert catalog.expression.split()[5] == "polaris"
    assert properties(_clause(catalog, "PROPERTIES")) == {
        "type": "iceberg", "iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://polaris-rest.polaris.svc:8181/api/catalog",
        "iceberg.catalog.warehouse": "fab", "iceberg.catalog.security": "oauth2",
        "iceberg.catalog.oauth2.credential": "starrocks-id:starrocksSecret", "iceberg.catalog.oauth2.scope": "PRINCIPAL_ROLE:ALL",
        "iceberg.catalog.vended-credentials-enabled": "true", "aws.s3.endpoint": "https://s3.site-t.fab.internal",
        "aws.s3.enable_path_style_access": "true", "aws.s3.region": "site-t",
    }


def test_fails_when_the_shell_expansion_leaves_a_quote_open(tmp_path, small_plan):
    """The parser, not the eye, finds statements the script's expansion broke: a quote left open in the shared S3
    properties swallows the statements up to the next one, and the script no longer sends its four. (sqlglot accepts a
    doubled or trailing comma in a list, which StarRocks may refuse: that it does not show.)"""
    (setup,) = [c for c in small_plan.objects("ConfigMap", "site-t-compute") if c["metadata"]["name"] == "starrocks-setup"]
    broken = setup["data"]["setup.sh"].replace('"aws.s3.region" = "$AWS_REGION"', '"aws.s3.region" = "$AWS_REGION')
    sent = starrocks_statements(broken, tmp_path)
    assert [s.this for s in sent] == ["SET", "CREATE"] and "SET fab_olap AS DEFAULT STORAGE VOLUME" in sent[1].expression


# ---------------------------------------------------------------------------------------------------------------------
# The Iceberg maintenance job (Spark SQL).

SETTINGS = IcebergMaintenanceConfig(targets=[{"namespace": "fdc"}], snapshot_retention_days=7, min_snapshots_kept=5).model_dump()
NOW = datetime(2026, 3, 10, 2, 0, tzinfo=UTC)


def call_arguments(statement: str) -> tuple[str, dict[str, exp.Expression]]:
    """A Spark `CALL catalog.system.procedure(name => value, ...)`: sqlglot has no CALL statement, so the call after it is
    parsed as a Spark function call with named arguments (the statement itself only as an opaque Command)."""
    assert isinstance(sqlglot.parse_one(statement, read="spark"), exp.Command) and statement.startswith("CALL ")
    call = sqlglot.parse_one(f"SELECT {statement.removeprefix('CALL ')}", read="spark").expressions[0]
    assert isinstance(call, exp.Dot) and isinstance(call.expression, exp.Anonymous), statement
    function = call.expression
    assert all(isinstance(a, exp.Kwarg) for a in function.expressions), f"positional arguments in {statement}"
    return f"{call.this.sql('spark')}.{function.name}", {a.this.name: a.expression for a in function.expressions}


def test_each_maintenance_procedure_runs_in_the_polaris_catalog_on_its_table_alone():
    calls = [call_arguments(sql) for _, sql in job.statements("fdc.lots", SETTINGS, NOW)]
    assert [(name, args["table"].name) for name, args in calls] == [
        ("fab.system.rewrite_data_files", "fdc.lots"), ("fab.system.rewrite_manifests", "fdc.lots"),
        ("fab.system.expire_snapshots", "fdc.lots"), ("fab.system.remove_orphan_files", "fdc.lots"),
    ]


def test_expiry_and_orphan_removal_are_bounded_by_timestamps_and_the_snapshots_kept():
    args = dict(call_arguments(sql) for _, sql in job.statements("fdc.lots", SETTINGS, NOW))
    expire, orphans = args["fab.system.expire_snapshots"], args["fab.system.remove_orphan_files"]
    assert (expire["older_than"].sql("spark"), expire["retain_last"].sql("spark")) == ("CAST('2026-03-03 02:00:00' AS TIMESTAMP)", "5")
    assert (orphans["older_than"].sql("spark"), orphans["prefix_listing"].sql("spark")) == ("CAST('2026-03-07 02:00:00' AS TIMESTAMP)", "TRUE")
    assert sorted(orphans) == ["older_than", "prefix_listing", "table"]  # never dry_run => false's opposite, never a location


def test_compaction_passes_its_options_as_a_string_map():
    options = dict(call_arguments(sql) for _, sql in job.statements("fdc.lots", SETTINGS, NOW))["fab.system.rewrite_data_files"]["options"]
    assert isinstance(options, exp.VarMap)
    assert dict(zip((k.name for k in options.args["keys"].expressions), (v.name for v in options.args["values"].expressions))) == {
        "target-file-size-bytes": "536870912", "partial-progress.enabled": "true"}


def test_a_quality_check_reads_its_table_in_the_polaris_catalog_alone():
    query = sqlglot.parse_one(job.check_query({"table": "fdc.lots", "sql": "SELECT * FROM {table} WHERE wafer_id IS NULL"}), read="spark")
    assert isinstance(query, exp.Select) and query.args["limit"].expression.sql() == "20"
    assert [(t.catalog, t.db, t.name) for t in query.find_all(exp.Table)] == [("fab", "fdc", "lots")]


def test_a_quality_check_that_closes_its_subquery_to_append_a_statement_is_no_longer_one_statement():
    """The config takes any text starting with SELECT or WITH; wrapped, a query that breaks out of the subquery makes
    more than one statement, which `spark.sql` refuses (it runs one)."""
    hostile = "SELECT 1) AS x; DROP TABLE fab.fdc.lots; SELECT * FROM (SELECT 1"
    assert len(sqlglot.parse(job.check_query({"table": "fdc.lots", "sql": hostile}), read="spark")) == 3


def test_the_tags_maintenance_reads_are_the_tables_refs():
    query = sqlglot.parse_one(f"SELECT name, snapshot_id FROM {job.CATALOG}.{job.quote('fdc.lots')}.refs", read="spark")
    (table,) = query.find_all(exp.Table)
    assert [p.name for p in table.parts] == ["fab", "fdc", "lots", "refs"]


# ---------------------------------------------------------------------------------------------------------------------
# The feature job (Spark SQL), run against a recording SparkSession.


class _Spark:
    def __init__(self, exists: bool):
        self.exists, self.sent = exists, []
        self.catalog = types.SimpleNamespace(tableExists=lambda name: self.exists)
        self.sparkContext = types.SimpleNamespace(applicationId="spark-app-1")

    def sql(self, text: str):
        self.sent.append(text)
        return types.SimpleNamespace(first=lambda: types.SimpleNamespace(snapshot_id=4242))


def feature_job_statements(monkeypatch, exists: bool) -> list[str]:
    spark = _Spark(exists)
    builder = types.SimpleNamespace(getOrCreate=lambda: spark)
    module = types.ModuleType("pyspark.sql")
    module.SparkSession = types.SimpleNamespace(builder=builder)
    monkeypatch.setitem(sys.modules, "pyspark", types.ModuleType("pyspark"))
    monkeypatch.setitem(sys.modules, "pyspark.sql", module)
    # Loaded afresh against the recording SparkSession, under a name of its own (components.feature_job stays untouched).
    spec = importlib.util.spec_from_file_location("feature_job_under_test", Path(components.__file__).parent / "feature_job.py")
    feature_job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(feature_job)

    monkeypatch.setattr(sys, "argv", ["feature_job", "--table", "features.wafer_v2", "--tag", "run-7",
                                      "--sql", "SELECT wafer_id, avg(thickness) AS t FROM fdc.lots GROUP BY wafer_id"])
    feature_job.main()
    return spark.sent


def test_the_feature_job_creates_the_table_as_iceberg_from_the_select(monkeypatch, capsys):
    create, snapshot, tag = feature_job_statements(monkeypatch, exists=False)
    parsed = sqlglot.parse_one(create, read="spark")
    assert isinstance(parsed, exp.Create) and parsed.kind == "TABLE" and parsed.this.sql("spark") == "features.wafer_v2"
    assert [p.this.name.lower() for p in parsed.find_all(exp.FileFormatProperty)] == ["iceberg"]
    assert [t.sql("spark") for t in parsed.expression.find_all(exp.Table)] == ["fdc.lots"]


def test_the_feature_job_overwrites_an_existing_table_and_tags_the_snapshot_its_application_wrote(monkeypatch, capsys):
    insert, snapshot, tag = feature_job_statements(monkeypatch, exists=True)
    parsed = sqlglot.parse_one(insert, read="spark")
    assert isinstance(parsed, exp.Insert) and parsed.args.get("overwrite") and parsed.this.sql("spark") == "features.wafer_v2"
    query = sqlglot.parse_one(snapshot, read="spark")
    assert [t.sql("spark") for t in query.find_all(exp.Table)] == ["features.wafer_v2.snapshots"]
    assert query.find(exp.EQ).sql("spark") == "summary['spark.app.id'] = 'spark-app-1'"
    # sqlglot has no grammar for Iceberg's ALTER TABLE ... CREATE TAG: the table and tag are found by its tokenizer.
    assert isinstance(sqlglot.parse_one(tag, read="spark"), exp.Command)
    assert [t.text for t in sqlglot.tokenize(tag, read="spark")] == [
        "ALTER", "TABLE", "features", ".", "wafer_v2", "CREATE", "TAG", "run-7", "AS", "OF", "VERSION", "4242"]
