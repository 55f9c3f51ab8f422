"""fab-platform: one fab site as a Pulumi stack (DESIGN section 2): config, providers, components, exports."""

import pulumi

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before the site is parsed)
from components.access import PreviewAccess, PreviewAccessArgs
from components.batch_inference import BatchInference, BatchInferenceArgs, shared_weights
from components.compute import ComputeCluster, ComputeClusterArgs
from components.config import load_secrets, load_site
from components.config import names as site_names
from components.config.checks.observability import receiver_pool
from components.config.schema.roadmap import switched_on
from components.engines._spark_trust import SparkTrust
from components.engines.trino import TRINO_NAMESPACE
from components.engines.trino import outside_calls as trino_outside_calls
from components.federation import SiteFederation, SiteFederationArgs
from components.gpu import GpuCluster, GpuClusterArgs
from components.iceberg_maintenance import maintained_namespaces
from components.identity import SiteIdentity, SiteIdentityArgs
from components.inference import InferencePool, InferencePoolArgs
from components.kube import Adoption
from components.monitors import metrics_scopes
from components.network import CrossClusterNetwork, CrossClusterNetworkArgs
from components.notebooks import GPU_NOTEBOOKS_UI, GpuNotebooks, GpuNotebooksArgs
from components.observability import GRAFANA, SiteObservability, SiteObservabilityArgs, cluster_manifests
from components.process import settle_after_imports
from components.profiles import ProfileSwitches, ProfileSwitchesArgs, leave_to_schedule, switched_objects
from components.providers import SiteRef, site_providers
from components.ray import RayPlatform, RayPlatformArgs, team_tokens
from components.registry import Registry
from components.runtimes import installed_runtimes
from components.sharing import VendorCatalog, VendorCatalogArgs, catalog_ui
from components.spark_rapids import SparkRapids, SparkRapidsArgs
from components.storage import StorageCluster, StorageClusterArgs
from components.training import TrainingPool, TrainingPoolArgs, tenant_labels

# Process-level settings (the collector), in one place so that the benchmarks' SDK floor makes the same ones.
settle_after_imports()

site = load_site()
secrets = load_secrets(site)
# Charts, images and release files from the site's registry when it has one (docs/airgap.md).
registry = Registry.of(site.registry, site.ca_bundle, secrets.registry_pull_secret)
providers = site_providers(site, registry)

# What the components take of the site, resolved once: each gets its clusters, its sections and these values.
site_ref = SiteRef.of(site)
(storage_cluster,) = providers.with_role("storage")
(compute_cluster,) = providers.with_role("compute")
teams = sorted(site.teams)
api_servers = {key: f"https://{cluster.api_server}:{cluster.api_server_port}" for key, cluster in site.clusters.items()}
multikueue_manager = providers.cluster(site.multikueue_manager()) if site.training.multikueue.enabled else None
ray = site.ray_enabled()
# Each team's Ray token: its Ray clusters on the GPU clusters and its members' Jupyter servers on compute hold it.
ray_tokens = team_tokens(teams) if ray else {}
# Profiles switched on a schedule (docs/operations.md, "Scheduled switching"): the fields a switch sets are left alone by
# `pulumi up` in the components that register them.
switched = switched_objects(site)
switched_by_schedule = pulumi.ResourceOptions(transformations=[leave_to_schedule(switched, providers.kubernetes)] if switched else None)

network = CrossClusterNetwork(
    "network",
    CrossClusterNetworkArgs(
        site=site_ref, clusters=providers.clusters, cluster_configs=site.clusters, flows=site.flow_table(), adopt=site.adopt,
        global_services=site.global_services_enabled(),
        outside_calls={TRINO_NAMESPACE: trino_outside_calls(site)} if site.compute.trino.enabled else {},
        tenants=tenant_labels(sorted(site.teams), site.remote_teams(linked_only=True)),
    ),
)
PreviewAccess("preview-access", PreviewAccessArgs(clusters=providers.clusters, adopt=site.adopt))
identity = SiteIdentity(
    "identity",
    SiteIdentityArgs(config=site.identity, keycloak_url=site.keycloak.url, teams=site.teams, adopt=site.adopt, provider=providers.keycloak),
)
# Offline batch inference (docs/roadmap.md phase 3): the teams' keys read the served weights, their namespaces get Job templates.
batch_inference_on = site.inference is not None and switched_on("batch-inference", site.inference.batch, site.phase)
storage = StorageCluster(
    "storage",
    StorageClusterArgs(
        site=site_ref,
        cluster=storage_cluster,
        config=site.storage,
        admin_endpoint=site.minio,
        minio_provider=providers.minio,
        federation_consumers=sorted(site.federation.consumers),
        replicated_classes=site.federation.replicated_classes(),
        teams=teams,
        adopt=site.adopt,
        network=network,
        catalog_clients=tuple(site.keys_with_role("compute", "gpu", "gpu-train")),
        aistor_license=secrets.aistor_license,
        aistor_root_password=secrets.aistor_root_password,
        metrics=site.observability is not None,
        maintained_namespaces=maintained_namespaces(site.compute),
        served_weights=shared_weights([spec.source for spec in site.inference.models.values()], teams) if batch_inference_on else (),
        replicated_models=site.replicated_models(),
    ),
)

gpus = {
    key: GpuCluster(
        f"gpu-{key}",
        GpuClusterArgs(
            cluster=providers.cluster(key), config=spec, node_pools={node: site.node_pool(key, node) for node in spec.nodes},
            serves_inference=site.inference is not None and key == site.inference.cluster, adopt=site.adopt,
            gpu_types=site.all_gpu_types(),
        ),
    )
    for key, spec in sorted(site.gpu.items())
}
# From phase 2 on (docs/roadmap.md); a phase 1 site brings up the GPU base without serving.
inference = InferencePool(
    "inference",
    InferencePoolArgs(
        site=site_ref,
        config=site.inference,
        capacity=site.model_capacity(),
        teams=teams,
        adopt=site.adopt,
        network=network,
        storage=storage,
        identity=identity,
        gpu=gpus[site.inference.cluster],
        api_server=api_servers[site.inference.cluster],
        rate_limit_saturation_percent=site.observability.alerts.rate_limit_saturation_percent if site.observability else None,
    ),
    opts=switched_by_schedule,
) if site.inference is not None else None
remote_teams = site.remote_teams(linked_only=True)
federation = SiteFederation(
    "federation",
    SiteFederationArgs(site=site_ref, config=site.federation, adopt=site.adopt, minio_provider=providers.minio, storage=storage,
                       remote_teams=remote_teams,
                       gold_consumers=frozenset(c for c in site.federation.consumers if site.replicates_gold(c))),
)
compute = ComputeCluster(
    "compute",
    ComputeClusterArgs(
        cluster=compute_cluster,
        config=site.compute,
        domain=site.domain,
        site=site.name,
        adopt=site.adopt,
        network=network,
        storage=storage,
        identity=identity,
        gpu_clusters=providers.with_role("gpu", "gpu-train"),
        federation=federation,
        serving=inference.serving_target if inference else None,
        serving_repo_token=secrets.serving_repo_token,
        serving_repo_write_token=secrets.serving_repo_write_token,
        extra_uis=[*([GRAFANA] if site.observability is not None and site.observability.grafana else []),
                   *([GPU_NOTEBOOKS_UI] if site.compute.jupyterhub.gpu_notebooks is not None else []),
                   *([catalog_ui(site.storage.polaris)] if site.storage.vendors else [])],
        ray_tokens=ray_tokens,
        catalog_passwords=secrets.catalog_passwords,
        teams=site.teams,
    ),
)
# ClusterMesh global services (phase 5): compute repeats the gateway's Service (StorageCluster has its clients repeat Polaris's).
if inference is not None and inference.gateway_global_service is not None:
    # The Service goes into compute's envoy-gateway-system namespace, which compute's ingress creates and ComputeCluster
    # does not expose: it waits for the ingress's Gateway, which comes after that namespace (and after Envoy Gateway's
    # chart, so the Service is created later than it needs to be; nothing waits for it).
    network.consume_global_service(inference.gateway_global_service, [compute_cluster.key],
                                   after={compute_cluster.key: [compute.gateway]})
# GPU notebooks (phase 4): their own hub on a GPU cluster, reached through the compute ingress.
notebooks_config = site.compute.jupyterhub.gpu_notebooks
notebooks = GpuNotebooks(
    "notebooks",
    GpuNotebooksArgs(
        config=notebooks_config, sharing=site.gpu[notebooks_config.cluster].sharing,
        cluster=providers.cluster(notebooks_config.cluster), compute=compute_cluster, gateway=compute.gateway,
        domain=site.domain, network=network, identity=identity, adopt=Adoption(site.adopt, notebooks_config.cluster),
        site_ca=storage.site_ca,
    ),
) if notebooks_config is not None else None
# Equipment vendors: the catalog API on the compute ingress (their principals and keys are StorageCluster's).
vendor_catalog = VendorCatalog(
    "vendor-catalog",
    VendorCatalogArgs(polaris=site.storage.polaris, compute=compute_cluster, gateway=compute.gateway, domain=site.domain,
                      vendors=site.storage.vendors),
) if site.storage.vendors else None
training = TrainingPool(
    "training",
    TrainingPoolArgs(
        site=site_ref,
        config=site.training,
        teams=teams,
        team_quotas=site.team_quotas(),
        gpus=gpus,
        api_servers=api_servers,
        compute=compute_cluster,
        manager=multikueue_manager,
        adopt=site.adopt,
        storage=storage,
        airflow_namespace=compute.airflow_namespace,
        remote_teams=remote_teams,
        federation=federation,
        identity=identity,
        runtimes=installed_runtimes(site.training, site.phase),
        spark_clusters=frozenset(key for key, spec in site.gpu.items() if spec.spark_rapids is not None),
    ),
    opts=switched_by_schedule,
)
# Spark RAPIDS by method B (phase 5): the Spark operator on the GPU clusters that name it, in their team namespaces.
spark_rapids = {
    key: SparkRapids(
        f"spark-rapids-{key}",
        SparkRapidsArgs(gpu=gpus[key], config=spec.spark_rapids,
                        team_namespaces={team: ns.resource for (c, team), ns in training.team_namespaces().items() if c == key},
                        kueue=training.kueue[key], catalog_uri=storage.catalog_uri, adopt=site.adopt,
                        trust=SparkTrust(storage.s3_ca_pem)),
    )
    for key, spec in sorted(site.gpu.items()) if spec.spark_rapids is not None
}
batch_inference = BatchInference(
    "batch-inference",
    BatchInferenceArgs(served=inference.served_models, team_namespaces=training.team_namespaces(), storage=storage),
) if inference is not None and batch_inference_on else None
if ray:
    RayPlatform(
        "ray",
        RayPlatformArgs(
            gpus={key: gpu.cluster for key, gpu in gpus.items()},
            lb_pools={key: site.clusters[key].clustermesh_pool for key in gpus},
            manager=multikueue_manager,
            team_namespaces={(c, ns.name): ns.resource for (c, _), ns in training.team_namespaces().items()},
            teams={site_names.TEAM_NAMESPACE(team): team for team in teams},
            tokens=ray_tokens,
            adopt=site.adopt,
        ),
    )
# Metrics of every cluster (issue 19): after the network (compute's receiver VIP), the identity and the ingress (Grafana).
observability = SiteObservability(
    "observability",
    SiteObservabilityArgs(
        site=site_ref,
        clusters=providers.clusters,
        config=site.observability,
        adopt=site.adopt,
        network=network,
        identity=identity,
        teams=teams,
        receiver_pool=receiver_pool(site),
        gateway=compute.gateway if site.observability.grafana else None,
        remote_write_password=secrets.metrics_remote_write_password,
        alert_webhook_url=secrets.alert_webhook_url,
        objects=cluster_manifests(metrics_scopes(site), site.observability),
        scrape_secrets={storage_cluster.key: storage.metrics_credentials},
        site_ca=storage.site_ca,
        query_namespaces=(site.acceptance.namespace,),
    ),
) if site.observability is not None else None
if site.profile_schedule is not None:
    ProfileSwitches(
        "profiles",
        ProfileSwitchesArgs(schedule=site.profile_schedule, active_profile=site.active_profile, switched=switched,
                            clusters=providers.clusters, adopt=site.adopt, registered_by=[training, *([inference] if inference else [])]),
    )

# Every object declared as existing (`adopt`) must be one the platform manages: a misspelt name would
# otherwise be created anew instead of imported.
if unclaimed := site.adopt.unclaimed():
    raise pulumi.RunError("\n".join(unclaimed))

pulumi.export("site", {"name": site.name, "domain": site.domain, "phase": site.phase})
pulumi.export("network", {"clusters": network.clusters, "flows": network.flows})
pulumi.export("identity", {"realm": identity.realm_id, "issuer_url": identity.issuer_url, "team_groups": identity.team_groups})
pulumi.export("data", storage.data)
pulumi.export("artifacts", storage.artifacts)
pulumi.export("serving", inference.serving if inference else None)
pulumi.export("capacity", inference.capacity if inference else {})
pulumi.export("training", {"submission": training.submission, "remote_submission": training.remote_submission,
                           "example_job": training.example_job, "profile": site.active_profile})
pulumi.export("spark_rapids", {key: rapids.application_template for key, rapids in spark_rapids.items()})
pulumi.export("batch_inference", batch_inference.templates if batch_inference else None)
pulumi.export("gpu_pools", {key: gpu.pools for key, gpu in gpus.items()})
pulumi.export("infiniband", {key: gpu.infiniband for key, gpu in gpus.items()})
pulumi.export("ui_urls", compute.ui_urls)
pulumi.export("gpu_notebooks", {"url": notebooks.url, "quotas": notebooks.quotas} if notebooks else None)
pulumi.export("observability", {"prometheus": observability.prometheus, "store": observability.store,
                                "grafana": observability.grafana_url} if observability else None)
pulumi.export("federation", federation.exports)
pulumi.export("vendors", storage.vendors)
pulumi.export("site_federation", {
    "replicates_to": sorted(c for c, spec in site.federation.consumers.items() if spec.replicate_gold),
    "reads_from": sorted(site.federation.peers),
    "linked": sorted(site.federation.linked),
})
pulumi.export("dns_records", pulumi.Output.all(storage.dns_records, *([inference.dns_records] if inference else []), compute.dns_records).apply(
    lambda records: {name: vip for part in records for name, vip in part.items()}
))
