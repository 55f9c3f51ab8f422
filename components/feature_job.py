"""The platform's feature job (docs/mlops.md, step (a) of the serving loop): a PySpark driver script, delivered as the
ConfigMap `feature-job` in Spark's namespace and mounted on the driver by the serving-loop DAG.

It writes a SELECT's result to an Iceberg table in Polaris (created on the first run, overwritten after), then tags the
snapshot this application committed with the run's tag, so that training reads exactly that snapshot by reference and
snapshot expiry never removes it while the tag exists. The snapshot is found by the Spark application id that Iceberg
records in every snapshot's summary, so a concurrent writer cannot make the tag point at someone else's snapshot.
"""

import argparse

from pyspark.sql import SparkSession


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--table", required=True, help="<namespace>.<table> in the fab catalog (Polaris)")
    parser.add_argument("--tag", required=True, help="the Iceberg tag that pins the snapshot written")
    parser.add_argument("--sql", required=True, help="the SELECT computing the features")
    args = parser.parse_args()
    spark = SparkSession.builder.getOrCreate()
    if spark.catalog.tableExists(args.table):
        spark.sql(f"INSERT OVERWRITE {args.table} {args.sql}")
    else:
        spark.sql(f"CREATE TABLE {args.table} USING iceberg AS {args.sql}")
    app = spark.sparkContext.applicationId
    written = spark.sql(
        f"SELECT snapshot_id FROM {args.table}.snapshots WHERE summary['spark.app.id'] = '{app}' "
        "ORDER BY committed_at DESC LIMIT 1"
    ).first()
    if written is None:
        raise SystemExit(f"{args.table} has no snapshot committed by {app}")
    spark.sql(f"ALTER TABLE {args.table} CREATE TAG `{args.tag}` AS OF VERSION {written.snapshot_id}")
    print(f"{args.table}: snapshot {written.snapshot_id} tagged {args.tag}")


if __name__ == "__main__":
    main()
