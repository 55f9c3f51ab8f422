"""The platform's Iceberg maintenance job (docs/operations.md, "Iceberg maintenance"): a PySpark driver script, delivered as
the ConfigMap `iceberg-maintenance-job` in Spark's namespace and mounted on the driver by the `iceberg_maintenance` DAG.

`--step maintain` runs, on each table of one namespace whose name matches the glob, Iceberg's Spark procedures in the
order that frees the most: rewrite_data_files (compaction), rewrite_manifests, expire_snapshots (older than the retention,
keeping the newest `retain_last` and every snapshot a tag or branch references), remove_orphan_files (older than the
safety margin). Before expiring it refuses a table whose pinned tag (a training run's, by prefix) carries a max
reference age, which would let expiry drop the tag and then its snapshot. `--step quality` runs the configured checks:
queries whose rows are violations. Every result is printed as one JSON line per table, for the Airflow task log.

Loaded by Spark alone; the pure functions (the statements it runs) are tested offline without Spark.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

CATALOG = "fab"
"""The Polaris catalog as the application's sparkConf names it (spark.sql.defaultCatalog)."""


def quote(identifier: str) -> str:
    """A dotted identifier with each part back-quoted."""
    return ".".join(f"`{part.replace('`', '``')}`" for part in identifier.split("."))


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def timestamp(now: datetime, days: int) -> str:
    return f"TIMESTAMP '{(now - timedelta(days=days)).strftime('%Y-%m-%d %H:%M:%S')}'"


def matching(tables: list[str], glob: str) -> list[str]:
    """The table names matching the glob (case-sensitive), in order."""
    return sorted(t for t in tables if fnmatch.fnmatchcase(t, glob))


def statements(table: str, settings: dict[str, Any], now: datetime) -> list[tuple[str, str]]:
    """(step, CALL) of the maintenance of one table (`<namespace>.<table>`), in the order they run."""
    name = literal(table)
    size = settings["target_file_size_mib"] * 1024 * 1024
    system = f"{CATALOG}.system"
    return [
        ("rewrite_data_files", (f"CALL {system}.rewrite_data_files(table => {name}, strategy => 'binpack', "
                               f"options => map('target-file-size-bytes', '{size}', 'partial-progress.enabled', 'true'))")),
        ("rewrite_manifests", f"CALL {system}.rewrite_manifests(table => {name})"),
        ("expire_snapshots", (f"CALL {system}.expire_snapshots(table => {name}, "
                             f"older_than => {timestamp(now, settings['snapshot_retention_days'])}, "
                             f"retain_last => {settings['min_snapshots_kept']})")),
        # Listed through the table's FileIO (S3FileIO: the vended or the maintenance principal's keys), not Hadoop's s3a.
        ("remove_orphan_files", (f"CALL {system}.remove_orphan_files(table => {name}, "
                                f"older_than => {timestamp(now, settings['orphan_file_age_days'])}, prefix_listing => true)")),
    ]


def expiring_pins(refs: list[dict[str, Any]], prefixes: list[str]) -> list[str]:
    """The pinned tags (by prefix) that expiry would drop by their own max reference age."""
    return sorted(r["name"] for r in refs if r["type"] == "TAG" and any(r["name"].startswith(p) for p in prefixes)
                  and r.get("max_reference_age_in_ms") is not None)


def check_query(check: dict[str, Any]) -> str:
    """A quality check's query on its table, limited to the first violations."""
    return f"SELECT * FROM ({check['sql'].replace('{table}', f'{CATALOG}.' + quote(check['table']))}) LIMIT 20"


def _rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in spark.sql(sql).collect()]


def maintain(spark: Any, namespace: str, glob: str, settings: dict[str, Any]) -> int:
    """Maintain the matching tables of one namespace; the number of tables that failed."""
    now = datetime.now(timezone.utc)  # noqa: UP017 (the Spark image runs Python 3.10: no datetime.UTC)
    tables = matching([r["tableName"] for r in _rows(spark, f"SHOW TABLES IN {CATALOG}.{quote(namespace)}")], glob)
    print(json.dumps({"namespace": namespace, "tables": glob, "matched": tables}), flush=True)
    failed = 0
    for name in tables:
        table = f"{namespace}.{name}"
        result: dict[str, Any] = {"table": table}
        try:
            pins = _rows(spark, f"SELECT name, type, snapshot_id, max_reference_age_in_ms FROM {CATALOG}.{quote(table)}.refs")
            if expiring := expiring_pins(pins, settings["pinned_tag_prefixes"]):
                raise RuntimeError(f"pinned tags {', '.join(expiring)} have a max reference age, so expiry would drop them and "
                                   "their snapshots: ALTER TABLE ... REPLACE TAG <tag> (without RETAIN) to keep them")
            kept = {r["name"]: r["snapshot_id"] for r in pins if r["type"] == "TAG"}
            for step, sql in statements(table, settings, now):
                result[step] = _rows(spark, sql) if step != "remove_orphan_files" else {"removed": len(_rows(spark, sql))}
            after = {r["name"]: r["snapshot_id"] for r in _rows(spark, f"SELECT name, snapshot_id FROM {CATALOG}.{quote(table)}.refs")}
            if lost := sorted(tag for tag, snapshot in kept.items() if after.get(tag) != snapshot):
                raise RuntimeError(f"tags {', '.join(lost)} no longer point at their snapshots after maintenance")
            result["tags_kept"] = len(kept)
        except Exception as error:  # noqa: BLE001 (one table's failure is reported, the others still run)
            failed += 1
            result["error"] = str(error)
        print(json.dumps(result, default=str), flush=True)
    return failed


def quality(spark: Any, checks: list[dict[str, Any]]) -> int:
    """Run the checks; the number that found violations (or failed to run)."""
    failed = 0
    for check in checks:
        try:
            violations = _rows(spark, check_query(check))
            result = {"check": check["name"], "table": check["table"], "passed": not violations, "violations": violations}
        except Exception as error:  # noqa: BLE001
            violations, result = [None], {"check": check["name"], "table": check["table"], "passed": False, "error": str(error)}
        failed += bool(violations)
        print(json.dumps(result, default=str), flush=True)
    return failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", choices=["maintain", "quality"], required=True)
    parser.add_argument("--namespace", help="the Polaris namespace (maintain)")
    parser.add_argument("--tables", default="*", help="glob over its table names (maintain)")
    parser.add_argument("--settings", required=True, help="the site's compute.iceberg_maintenance, as JSON")
    args = parser.parse_args()
    settings = json.loads(args.settings)

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    if args.step == "maintain":
        failed = maintain(spark, args.namespace, args.tables, settings)
        what = "tables"
    else:
        failed = quality(spark, settings["quality_checks"])
        what = "quality checks"
    if failed:
        sys.exit(f"{failed} {what} failed (see the lines above)")


if __name__ == "__main__":
    main()
