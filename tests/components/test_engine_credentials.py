"""Who reads which credentials: every namespace that receives a credential Secret says which engine runs there, and an
object that runs as another principal in that namespace says so on itself (DESIGN section 2, least privilege)."""

from __future__ import annotations

ENGINE = "fab.internal/engine"


def test_every_namespace_that_receives_credentials_names_the_engine_running_there(full_plan):
    namespaces = {(full_plan.cluster(r), r["inputs"]["metadata"]["name"]): r["inputs"]["metadata"]["labels"]
                  for r in full_plan.of_type("kubernetes:core/v1:Namespace")}
    receiving = {(full_plan.cluster(r), r["inputs"]["metadata"]["namespace"]) for r in full_plan.of_type("kubernetes:core/v1:Secret")
                 if ENGINE in (r["inputs"]["metadata"].get("labels") or {})}
    assert len(receiving) > 5
    assert {f"{c}/{ns}": namespaces[c, ns].get(ENGINE) for c, ns in sorted(receiving)} == {
        "site-t-compute/spark": "spark", "site-t-compute/spark-team-fdc": "training", "site-t-compute/spark-team-yield": "training",
        "site-t-compute/starrocks": "starrocks", "site-t-compute/trino": "trino",
        "site-t-gpu/inference": "inference", "site-t-gpu/team-fdc": "training", "site-t-gpu/team-yield": "training",
        "site-t-gpu-train/team-fdc": "training", "site-t-gpu-train/team-yield": "training", "site-t-storage/polaris": "polaris",
    }


def test_every_engine_namespace_names_its_engine(full_plan):
    labels = {obj["metadata"]["name"]: obj["metadata"]["labels"].get(ENGINE) for obj in full_plan.objects("Namespace", "site-t-compute")}
    assert {ns: labels[ns] for ns in ("airflow", "jupyterhub", "spark", "starrocks", "superset", "trino")} == {
        ns: ns for ns in ("airflow", "jupyterhub", "spark", "starrocks", "superset", "trino")
    }


def test_the_catalog_database_runs_as_the_backup_principal_whose_keys_it_reads(small_plan):
    (database,) = [c for c in small_plan.objects("Cluster", "site-t-storage") if c["metadata"]["name"] == "polaris-db"]
    assert database["metadata"]["labels"] == {ENGINE: "postgres-backup"}
    assert database["spec"]["backup"]["barmanObjectStore"]["s3Credentials"]["accessKeyId"]["name"] == "s3-postgres-backup"
