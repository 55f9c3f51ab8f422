"""fab-catalog-uri-polaris with global services: a catalog may name Polaris by its cluster-local name exactly when the
Polaris REST Service is a ClusterMesh global service."""

from __future__ import annotations

from policy_fixtures import check, k8s, kube
from rules.catalog import catalog_uri_polaris, polaris_endpoints

COMPUTE = "site-a-compute"
LOCAL_URI = "http://polaris-rest.polaris.svc:8181/api/catalog"


def polaris_service(**extra: str):
    return kube(k8s(
        "Service", "polaris-rest", "polaris",
        annotations={"lbipam.cilium.io/ips": "10.10.101.11", "external-dns.alpha.kubernetes.io/hostname": "polaris.site-a.fab.internal",
                     **extra},
        spec={"type": "LoadBalancer", "selector": {"app.kubernetes.io/name": "polaris"},
              "ports": [{"name": "rest", "port": 8181, "targetPort": 8181, "protocol": "TCP"}]},
    ), "site-a-storage")


def spark_defaults(uri: str):
    text = (
        "spark.sql.catalog.fab org.apache.iceberg.spark.SparkCatalog\n"
        "spark.sql.catalog.fab.type rest\n"
        f"spark.sql.catalog.fab.uri {uri}\n"
    )
    return kube(k8s("ConfigMap", "spark-defaults", "spark", data={"spark-defaults.conf": text}), COMPUTE)


GLOBAL = {"service.cilium.io/global": "true"}


def test_a_global_polaris_service_adds_its_cluster_local_names():
    assert polaris_endpoints([polaris_service(**GLOBAL)]) == [
        ("10.10.101.11", 8181), ("polaris-rest.polaris.svc", 8181), ("polaris-rest.polaris.svc.cluster.local", 8181),
        ("polaris.site-a.fab.internal", 8181),
    ]


def test_polaris_by_its_cluster_local_name_passes_when_its_service_is_global():
    for uri in (LOCAL_URI, "http://polaris-rest.polaris.svc.cluster.local:8181/api/catalog"):
        assert check(catalog_uri_polaris, [polaris_service(**GLOBAL), spark_defaults(uri)]) == []


def test_fails_when_a_catalog_names_polaris_by_its_cluster_local_name_and_its_service_is_not_global():
    assert check(catalog_uri_polaris, [polaris_service(), spark_defaults(LOCAL_URI)]) == [
        (f"ConfigMap spark/spark-defaults (data.spark-defaults.conf) on site-a-compute sets spark.sql.catalog.fab.uri={LOCAL_URI}, "
         "which is not Polaris's REST endpoint; allowed: this site's Polaris REST endpoint (10.10.101.11:8181, "
         "polaris.site-a.fab.internal:8181, path /api/catalog), or a linked peer's Polaris read from its stack"),
    ]
