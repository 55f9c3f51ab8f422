"""StarRocks: shared-data OLAP on AIStor with stateless, autoscaled compute nodes (DESIGN section 2, compute row).

Three FE keep the metadata; CN keep no state but a local NVMe data cache, on a cache StorageClass this engine
creates on the compute cluster; the shared-data storage volume, its S3 keys and the Polaris external catalog are
created by a run-once setup Job over the MySQL protocol. StarRocks is interactive: FE, CN and the setup Job run
in the interactive pool (the CRD has no priorityClassName, so FE and CN run at the default priority 0, which is
above batch's).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import versions
from components.airgap import mirror_repository, named_secrets
from components.config import BucketAccess, StarRocksConfig
from components.constants import polaris_secret, s3_secret
from components.engines._base import INTERACTIVE, Engine, EngineChart, EngineScope, Quota
from components.jvm_trust import CA_FILE_KEY, JVM_TRUST_STORE_KEY, jvm_trust_options, public_and_site_pem, public_and_site_store
from components.kube import cache_storage_class, restricted_container, run_once_job
from components.placement import Pods
from components.registry import UPSTREAM, Registry

CLUSTER = "starrocks"
CN_CACHE_PATH = "/opt/starrocks/cn/storage"
"""Where CN keep their data cache: the default `storage_root_path` of a CN."""
FE_CONF = "fe.conf"
SETUP_SCRIPT = Path(__file__).parents[1] / "starrocks_setup.sh"
CATALOG_URI = "@POLARIS_CATALOG_URI@"
"""Where the setup script's catalog takes this site's Polaris URI, written out so that the policy pack can check it."""
SETUP_USER = 10001
SITE_CA_CONFIG_MAP = "starrocks-site-ca"
"""The ConfigMap in StarRocks' namespace with the CAs its FE and CN verify the site's object store with, where the site
has its own CA: a Java trust store and a PEM bundle, each of the public CAs and the site's (components/jvm_trust.py)."""
FE_TRUST_DIR = "/etc/fab/site-ca"
"""Where the FE mount that ConfigMap; their JVM's default trust store is the Java one in it."""
CN_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"
"""The CA file the CN's libcurl reads: the Ubuntu path the -ubuntu images' curl was built with (StarRocks' AWS SDK for C++
sets no CA file of its own: StarRocks issues 23506, 27766), over which the CN mount the PEM bundle."""


def fe_conf() -> str:
    """fe.conf: shared-data, tables on S3 (the storage volume is created by the setup Job, not from this file)."""
    return "run_mode = shared_data\ncloud_native_storage_type = S3\nenable_load_volume_from_conf = false\n"


def _trust(site_ca: bool) -> tuple[dict, dict]:
    """What FE and CN add to trust the site's CA (nothing without one). The FE (Java: the storage volume's and the Iceberg
    catalog's S3 clients, AWS SDK for Java) read their JVM's default trust, which `JAVA_TOOL_OPTIONS` points at the
    mounted store; the CN (C++: AWS SDK for C++ over libcurl) read the system CA file, which the bundle replaces."""
    if not site_ca:
        return {}, {}
    fe = {
        "feEnvVars": [{"name": "JAVA_TOOL_OPTIONS", "value": " ".join(jvm_trust_options(f"{FE_TRUST_DIR}/{JVM_TRUST_STORE_KEY}"))}],
        "configMaps": [{"name": SITE_CA_CONFIG_MAP, "mountPath": FE_TRUST_DIR}],
    }
    cn = {"configMaps": [{"name": SITE_CA_CONFIG_MAP, "mountPath": CN_CA_FILE, "subPath": CA_FILE_KEY}]}
    return fe, cn


def _cluster_spec(cfg, registry: Registry = UPSTREAM, site_ca: bool = False) -> dict:
    """FE and CN as the operator runs them: their images (and pull Secret) from `registry`, and the site's CA where it has
    one."""
    place = {"nodeSelector": ENGINE.pool.node_selector, "tolerations": ENGINE.pool.tolerations,
             **({"imagePullSecrets": registry.pull_secrets} if registry.pull_secret else {})}
    fe_trust, cn_trust = _trust(site_ca)
    return {
        "starRocksFeSpec": {
            "image": registry.image(versions.STARROCKS_FE_IMAGE),
            "replicas": 3,
            "requests": {"cpu": "4", "memory": "16Gi"},
            "limits": {"cpu": "8", "memory": "32Gi"},
            "configMapInfo": {"configMapName": "starrocks-fe-conf", "resolveKey": FE_CONF},
            "storageVolumes": [{"name": "fe-meta", "storageSize": "50Gi", "mountPath": "/opt/starrocks/fe/meta"}],
            "runAsNonRoot": True,
            **fe_trust,
            **place,
        },
        "starRocksCnSpec": {
            "image": registry.image(versions.STARROCKS_CN_IMAGE),
            "requests": {"cpu": "8", "memory": "32Gi"},
            "limits": {"cpu": "16", "memory": "64Gi"},
            "runAsNonRoot": True,
            "autoScalingPolicy": {
                "version": "v2",
                "minReplicas": cfg.cn_min_replicas,
                "maxReplicas": cfg.cn_max_replicas,
                "hpaPolicy": {"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]},
            },
            "storageVolumes": [{
                "name": "cn-cache",
                "storageClassName": cfg.cache_storage_class,
                "storageSize": f"{cfg.cache_size_gib}Gi",
                "mountPath": CN_CACHE_PATH,
            }],
            **cn_trust,
            **place,
        },
    }


def setup_script(catalog_uri: str) -> str:
    """The setup script with the Polaris catalog's URI in place; credentials stay environment references."""
    script = SETUP_SCRIPT.read_text()
    if CATALOG_URI not in script:
        raise ValueError(f"{SETUP_SCRIPT} has no {CATALOG_URI} for the catalog URI")
    return script.replace(CATALOG_URI, catalog_uri)


def _deploy(scope: EngineScope) -> None:
    ns = ENGINE.namespace
    ns_resource = scope.namespace(ENGINE)
    # the chart's objects go in the engine's namespace, which must exist first
    operator = scope.release("starrocks-operator", versions.STARROCKS_OPERATOR, ns, {"timeZone": "UTC"}, [ns_resource])
    grants = scope.grants(ENGINE, ns_resource)
    # Shared-data: CN keep no state; the storage volume (and its keys) is created by the setup Job.
    conf = scope.config_map("starrocks-fe-conf", ns, {FE_CONF: fe_conf()}, ns_resource)
    cfg = ENGINE.config(scope.compute)
    pem = scope.storage.admin_endpoint.ca_bundle
    trust = [] if pem is None else [k8s.core.v1.ConfigMap(
        f"{scope.prefix}-{SITE_CA_CONFIG_MAP}", metadata={"name": SITE_CA_CONFIG_MAP, "namespace": ns},
        data={CA_FILE_KEY: public_and_site_pem(pem)},
        binary_data={JVM_TRUST_STORE_KEY: base64.b64encode(public_and_site_store(pem)).decode()},
        # the namespace must exist before anything is created in it
        opts=scope.after(ns_resource))]
    cache = cache_storage_class(f"{scope.prefix}-starrocks-cache", cfg.cache_storage_class, scope.compute.nvme_provisioner,
                                "StarRocks CN data cache only; the olap bucket holds the tables", scope.child)
    cluster = k8s.apiextensions.CustomResource(
        f"{scope.prefix}-starrocks",
        api_version=versions.STARROCKS_API,
        kind="StarRocksCluster",
        metadata={"name": CLUSTER, "namespace": ns},
        spec=_cluster_spec(cfg, scope.cluster.registry, site_ca=pem is not None),
        # the operator's chart installs the StarRocksCluster CRD; the FE mounts `conf` (and FE and CN `trust`), the CN's
        # cache volumes use `cache`
        opts=scope.after(operator, conf, cache, *trust),
    )
    root = scope.secret("starrocks-root", "starrocks-root", ns,
                        {"STARROCKS_ROOT_PASSWORD": scope.random("starrocks-root", 32)}, ns_resource)
    setup = scope.config_map("starrocks-setup", ns, {"setup.sh": scope.storage.catalog_uri.apply(setup_script)}, ns_resource)
    container = restricted_container(
        "setup", scope.cluster.registry.image(versions.MYSQL_CLIENT_IMAGE), SETUP_USER,
        command=["bash", "/etc/starrocks-setup/setup.sh"],
        env=[
            {"name": "HOME", "value": "/tmp"},
            {"name": "MYSQL_HISTFILE", "value": "/dev/null"},
            {"name": "STARROCKS_HOST", "value": f"{CLUSTER}-fe-service.{ns}.svc"},
            {"name": "OLAP_LOCATION", "value": f"s3://{scope.storage.bucket_of('olap')}/starrocks"},
        ],
        envFrom=[{"secretRef": {"name": name}} for name in ("starrocks-root", polaris_secret("starrocks"), s3_secret("starrocks"))],
        resources={"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        volumeMounts=[{"name": "setup", "mountPath": "/etc/starrocks-setup", "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}],
    )
    run_once_job(
        f"{scope.prefix}-starrocks-setup-job", name="starrocks-setup", namespace=ns, containers=[container],
        volumes=[{"name": "setup", "configMap": {"name": "starrocks-setup"}}, {"name": "tmp", "emptyDir": {}}],
        backoff_limit=20,
        placement=ENGINE.pool.placement(), registry=scope.cluster.registry,
        # The Job connects to the cluster's FE as root (`root`), runs `setup` and signs in to the catalog and S3 with the
        # engine's keys (`grants`).
        opts=pulumi.ResourceOptions(parent=scope.parent, depends_on=[cluster, root, setup, *grants], replace_on_changes=["spec"]),
    )

def _starrocks_operator_images(registry: Registry) -> dict[str, Any]:
    """Chart operator 1.11.5: the operator's `starrocksOperator.image.repository` and pull Secrets. The FE and CN images
    are the StarRocksCluster's (components/engines/starrocks.py); the operator launches nothing else while the cluster
    has no FE proxy (whose default is nginx:1.24.0)."""
    return {"starrocksOperator": {"image": {"repository": mirror_repository(registry, "starrocks/operator")},
                                  "imagePullSecrets": named_secrets(registry)}}


def _starrocks_pods(group: str, component: str) -> Pods:
    # Operator 1.11.5's StarRocksCluster has no priorityClassName: its pods run at the priority of a pod that names none.
    return Pods(group, (f"spec.{component}.nodeSelector",), (f"spec.{component}.tolerations",), only_with=f"spec.{component}")


ENGINE = Engine(
    name="starrocks",
    description="StarRocks",
    pool=INTERACTIVE,
    quota=Quota(cpu="256", memory="2Ti"),
    # StarRocks reads the lakehouse and keeps its own tables and materialized views in its shared-data bucket.
    buckets=BucketAccess(read=("gold", "warehouse"), read_write=("olap",)),
    catalog_role="reader",
    deploy=_deploy,
    section=StarRocksConfig,
    charts=(EngineChart(versions.STARROCKS_OPERATOR, _starrocks_operator_images),),
    kinds={"StarRocksCluster": tuple(_starrocks_pods(g, f"starRocks{g.title()}Spec") for g in ("FE", "BE", "CN"))},
)
