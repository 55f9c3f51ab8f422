"""Iceberg table maintenance as scheduled work (DESIGN use cases 2 and 5: "compaction jobs run nightly in Batch", "quality
checks, compaction, snapshot cleanup"): what the platform's `iceberg_maintenance` DAG keeps tidy, when, and how long
snapshots live (`compute.iceberg_maintenance`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from components.config.fields import CronSchedule, Flag, Unique, _Model

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
NAMESPACE_PATTERN = rf"^{IDENTIFIER}(\.{IDENTIFIER})*$"
TABLE_GLOB = r"^[A-Za-z0-9_*?\[\]]+$"
QUALIFIED_TABLE = rf"^{IDENTIFIER}(\.{IDENTIFIER})+$"
CHECK_NAME = r"^[a-z][a-z0-9_]{0,62}$"
TAG_PREFIX = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def _select(value: str) -> str:
    if not value.lstrip().lower().startswith(("select", "with")):
        raise ValueError("must be a query (SELECT or WITH ...) whose rows are the violations; it may not change data")
    if any(delimiter in value for delimiter in ("{{", "{%", "{#")):
        raise ValueError("contains a Jinja delimiter ({{, {% or {#), which Airflow would expand in the submitted job; write "
                         "the query without one")
    return value


class MaintenanceTarget(_Model):
    """The tables of one Polaris namespace the maintenance runs on."""

    namespace: str = Field(
        pattern=NAMESPACE_PATTERN,
        description="The Polaris namespace, dotted for a nested one (`fdc` or `fdc.raw`). The maintenance principal gets its "
        "grants on it, and its S3 keys its location (`<warehouse bucket>/<namespace path>/`, gold's in the gold bucket); the "
        "setup Job creates it when it does not exist yet.",
    )
    tables: str = Field(
        "*", pattern=TABLE_GLOB,
        description="Which of its tables (a glob over table names: `*`, `wafer_*`, `lot_[ab]*`). Defaults to every table.",
    )


class QualityCheck(_Model):
    """A data-quality check run after maintenance: a query whose rows are violations (none: the check passes)."""

    name: str = Field(pattern=CHECK_NAME, description="Name of the check in the task log ([a-z0-9_], starting with a letter).")
    table: str = Field(
        pattern=QUALIFIED_TABLE,
        description="The table it checks, `<namespace>.<table>`, in a namespace of `targets` (the principal reads nothing else).",
    )
    sql: Annotated[str, AfterValidator(_select)] = Field(
        min_length=1,
        description="A SELECT whose rows are the violations, `{table}` standing for the table, e.g. `SELECT * FROM {table} "
        "WHERE wafer_id IS NULL`. The check fails with the first rows in the task log.",
    )


class IcebergMaintenanceConfig(_Model):
    """Nightly Iceberg maintenance of the configured tables: compaction, snapshot expiry (keeping pinned snapshots), orphan
    file removal and manifest rewriting, then the quality checks. Runs as Spark on the batch pool, scheduled by Airflow."""

    enabled: Flag = Field(True, description="Run it. Defaults to true once the section is given (no section: no maintenance).")
    schedule: CronSchedule = Field(
        "0 2 * * *", description="When the DAG runs (cron, in Airflow's time zone, UTC by default). Defaults to 02:00 nightly.",
    )
    targets: Annotated[list[MaintenanceTarget], Unique] = Field(
        min_length=1, description="The namespaces and their tables to maintain; each is its own Spark job (a task of the DAG).",
    )
    snapshot_retention_days: int = Field(
        7, ge=1, le=3650, strict=True,
        description="Snapshots older than this are expired, except the newest `min_snapshots_kept` and every snapshot a tag or "
        "branch references. Defaults to 7.",
    )
    min_snapshots_kept: int = Field(
        1, ge=1, le=10_000, strict=True,
        description="Newest snapshots of each table kept whatever their age (`retain_last`). Defaults to 1.",
    )
    pinned_tag_prefixes: Annotated[list[Annotated[str, Field(pattern=TAG_PREFIX)]], Unique] = Field(
        default_factory=lambda: ["fab-"],
        description="Tags that pin a snapshot for a training run (the serving loop tags each run's features `fab-<run>`): "
        "expiry keeps every tagged snapshot, and refuses a table whose pinned tag would expire by its own max age. Defaults "
        "to [fab-].",
    )
    orphan_file_age_days: int = Field(
        3, ge=1, le=365, strict=True,
        description="Files no snapshot references are deleted once older than this: a safety margin for writes still in "
        "flight (Iceberg refuses less than a day). Defaults to 3.",
    )
    target_file_size_mib: int = Field(
        512, ge=16, le=8192, strict=True, description="Data file size compaction writes towards. Defaults to 512.",
    )
    quality_checks: Annotated[list[QualityCheck], Unique] = Field(
        default_factory=list,
        description="Checks run after maintenance (the task `quality_checks`); a failing check fails the run. None by default.",
    )
