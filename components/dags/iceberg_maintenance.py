"""Nightly Iceberg table maintenance (compute.iceberg_maintenance; docs/operations.md, "Iceberg maintenance"), shipped by the
platform into Airflow.

On the configured schedule, one task per configured namespace (`maintain_<namespace>`) runs a Spark job on the batch
pool that, table by table, compacts data files, rewrites manifests, expires snapshots older than the retention (keeping
the newest few and every tagged snapshot, such as a training run's `fab-<run>`) and removes orphan files older than the
safety margin. Then the data-quality hook point:

- `quality_checks` (when the site configures checks) runs each configured query and fails on violations;
- `maintained`, last, updates the Airflow asset `iceberg_maintenance` when every task succeeded: a team's own DAG with
  `schedule=[Asset("iceberg_maintenance")]` runs its further checks (or anything else) right after each good run.

This file is loaded by Airflow alone and imports nothing of the platform's program: the SparkApplications it submits are
built by the platform (components/iceberg_maintenance.py) and read from `platform.json` beside it. Without
`iceberg_maintenance` there, the file defines no DAG.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PLATFORM_FILE = Path(__file__).with_name("platform.json")
"""The site's settings for the platform's DAGs, written by the platform (components/engines/airflow.py) beside this file."""
DAG_ID = "iceberg_maintenance"
QUALITY_TASK = "quality_checks"
DONE_TASK = "maintained"
ASSET = "iceberg_maintenance"
"""The asset `maintained` updates after a fully successful run: what teams schedule their own checks on."""


def load_settings(path: Path = PLATFORM_FILE) -> dict[str, Any] | None:
    """`iceberg_maintenance` of `platform.json`, or None (the site does not maintain tables, or the file is not mounted)."""
    return json.loads(path.read_text()).get("iceberg_maintenance") if path.is_file() else None


def maintenance_tasks(settings: dict[str, Any]) -> list[str]:
    """The tasks that maintain a namespace, in config order."""
    return [task for task in settings["applications"] if task != QUALITY_TASK]


def _build_dag(settings: dict[str, Any]) -> Any:
    from airflow.providers.cncf.kubernetes.operators.spark_kubernetes import SparkKubernetesOperator
    from airflow.sdk import DAG, Asset, task

    applications = settings["applications"]

    def spark_task(task_id: str, **kwargs: Any) -> Any:
        return SparkKubernetesOperator(
            task_id=task_id,
            namespace=settings["namespace"],
            template_spec=applications[task_id],
            get_logs=True,
            # Kept for `kubectl get sparkapplications` until its timeToLiveSeconds; the task log holds the driver's output.
            delete_on_termination=False,
            **kwargs,
        )

    with DAG(
        dag_id=DAG_ID,
        description="Iceberg maintenance: compaction, manifests, snapshot expiry, orphan files; then quality checks",
        schedule=settings["schedule"],
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        tags=["fab-platform", "iceberg"],
        doc_md=__doc__,
    ) as dag:
        maintained = [spark_task(task_id) for task_id in maintenance_tasks(settings)]
        last = maintained
        if QUALITY_TASK in applications:
            # Checks run even where a namespace's maintenance failed: its tables are still there to check.
            checks = spark_task(QUALITY_TASK, trigger_rule="all_done")
            maintained >> checks
            last = [*maintained, checks]

        @task(task_id=DONE_TASK, outlets=[Asset(ASSET)])
        def done() -> None:
            """Every task succeeded (the default trigger rule): the asset's update starts the teams' own checks."""

        last >> done()
    return dag


SETTINGS = load_settings()
if SETTINGS is not None:
    dag = _build_dag(SETTINGS)
