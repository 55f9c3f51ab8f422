"""Spark's JVMs trust the site's CA where it issued the S3 endpoint's certificate (components/engines/_spark_trust.py)."""

from __future__ import annotations

import base64
import subprocess
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
from engines import engine
from helpers import render_small
from small_site import SITE_CA, small_site

from components.config import RegistryConfig, SparkRapidsConfig
from components.config.views import read_ca_bundle
from components.engines import _spark_connect as spark_connect
from components.engines import _spark_trust as jvm_trust
from components.engines.spark import spark_application_template
from components.registry import UPSTREAM, Registry
from components.spark_rapids import spark_rapids_application
from fabctl.render import PROJECT_DIR

COMPUTE = "site-t-compute"
CATALOG = "http://polaris.site-t.fab.internal:8181/api/catalog"
SITE_PEM = read_ca_bundle(str(PROJECT_DIR / SITE_CA))
REGISTRY_CA = "certs/site-a-ca.pem"
TRUST = jvm_trust.SparkTrust(SITE_PEM)
MAVEN_REGISTRY = Registry(RegistryConfig(charts="oci://registry.fab.internal/charts", images="registry.fab.internal/mirror",
                                         maven="https://maven.fab.internal/repository/central"),
                          ca_file=str(PROJECT_DIR / REGISTRY_CA))
OPTIONS = [{"name": "JAVA_TOOL_OPTIONS",
            "value": "-Djavax.net.ssl.trustStore=/etc/spark-trust/truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12"}]
MOUNT = {"name": "spark-trust", "mountPath": "/etc/spark-trust", "readOnly": True}


def subjects(pem: str) -> set[bytes]:
    """The certificates of a PEM bundle (DER)."""
    return {c.public_bytes(Encoding.DER) for c in x509.load_pem_x509_certificates(pem.encode())}


def store_subjects(binary: dict[str, str]) -> set[bytes]:
    store = pkcs12.load_pkcs12(base64.b64decode(binary[jvm_trust.TRUST_STORE_KEY]), None)
    return {c.certificate.public_bytes(Encoding.DER) for c in store.additional_certs}


def test_without_tls_to_s3_spark_trusts_nothing_more():
    assert jvm_trust.SparkTrust.of(SITE_PEM, s3_tls=False).needed is False


@pytest.mark.filterwarnings("ignore:Parsed a serial number")  # a public root with a negative serial (_spark_trust._store)
def test_resolving_from_maven_central_the_store_keeps_the_public_cas_beside_the_sites():
    found = store_subjects(jvm_trust.config_map_binary(TRUST, UPSTREAM))
    assert (subjects(SITE_PEM) <= found, subjects(jvm_trust.public_cas()) <= found) == (True, True)


def test_resolving_from_the_sites_repository_the_store_holds_the_site_and_registry_cas_only():
    found = store_subjects(jvm_trust.config_map_binary(TRUST, MAVEN_REGISTRY))
    assert found == subjects(SITE_PEM) | subjects(read_ca_bundle(str(PROJECT_DIR / REGISTRY_CA)))


def test_java_reads_the_store(tmp_path):
    keytool = engine("keytool")
    store = tmp_path / "truststore.p12"
    store.write_bytes(base64.b64decode(jvm_trust.config_map_binary(TRUST, MAVEN_REGISTRY)[jvm_trust.TRUST_STORE_KEY]))
    listed = subprocess.run([keytool, "-list", "-keystore", str(store), "-storetype", "PKCS12", "-storepass", ""],
                            capture_output=True, text=True, check=False)
    assert listed.stdout.count("trustedCertEntry") == len(subjects(SITE_PEM) | subjects(read_ca_bundle(str(PROJECT_DIR / REGISTRY_CA))))


def test_the_templates_driver_and_executor_trust_the_store_once_with_a_registry_ca():
    spec = spark_application_template(CATALOG, MAVEN_REGISTRY, TRUST)["spec"]
    assert ({v["name"] for v in spec["volumes"]} >= {"spark-trust", "spark-maven"},
            spec["driver"]["env"], spec["executor"]["env"], MOUNT in spec["driver"]["volumeMounts"],
            MOUNT in spec["executor"]["volumeMounts"]) == (True, OPTIONS, OPTIONS, True, True)


def test_the_spark_rapids_templates_driver_and_executor_trust_the_store():
    spec = spark_rapids_application(SparkRapidsConfig(), CATALOG, trust=TRUST)["spec"]
    assert (spec["driver"]["env"], spec["executor"]["env"], MOUNT in spec["executor"]["volumeMounts"],
            {"name": "spark-trust", "configMap": {"name": "spark-trust"}} in spec["volumes"]) == (OPTIONS, OPTIONS, True, True)


def test_the_connect_server_and_its_executors_trust_the_store():
    server = spark_connect.server_container(4, "spark-team-yield", UPSTREAM, TRUST)
    executor = spark_connect.executor_template(UPSTREAM, TRUST)["spec"]
    (container,) = executor["containers"]
    assert ([e for e in server["env"] if e["name"] == "JAVA_TOOL_OPTIONS"], MOUNT in server["volumeMounts"],
            [e for e in container["env"] if e["name"] == "JAVA_TOOL_OPTIONS"], MOUNT in container["volumeMounts"],
            {"name": "spark-trust", "configMap": {"name": "spark-trust"}} in executor["volumes"]) == (OPTIONS, True, OPTIONS, True, True)


@pytest.fixture(scope="module")
def trusting_plan() -> Any:
    site = small_site()
    site["ca_bundle"] = SITE_CA
    site["compute"]["iceberg_maintenance"] = {"targets": [{"namespace": "fdc"}]}
    return render_small(site)


def test_every_spark_namespace_of_the_site_holds_the_store(trusting_plan):
    found = {c["metadata"]["namespace"] for c in trusting_plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "spark-trust"}
    assert found == {"spark", "spark-team-yield", "iceberg-maintenance"}


def test_airflows_template_trusts_the_sites_ca(trusting_plan):
    (config,) = [c for c in trusting_plan.objects("ConfigMap", COMPUTE) if c["metadata"]["name"] == "spark-application"]
    spec = yaml.safe_load(config["data"]["sparkapplication.yaml"])["spec"]
    assert (spec["driver"]["env"], spec["executor"]["env"]) == (OPTIONS, OPTIONS)
