"""A test program: SiteObservability registering one manifest of each kind it takes, rendered by
tests/components/test_observability.py (the stack's program hands it none until the builders are wired)."""

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before the site is parsed)
from components.config import load_site
from components.config.rules.observability import receiver_pool
from components.identity import SiteIdentity, SiteIdentityArgs
from components.network import CrossClusterNetwork, CrossClusterNetworkArgs
from components.observability import SiteObservability, SiteObservabilityArgs
from components.providers import SiteRef, site_providers

site = load_site()
providers = site_providers(site)
network = CrossClusterNetwork("network", CrossClusterNetworkArgs(
    site=SiteRef.of(site), clusters=providers.clusters, cluster_configs=site.clusters, flows=site.flow_table(), adopt=site.adopt,
))
identity = SiteIdentity("identity", SiteIdentityArgs(config=site.identity, keycloak_url=site.keycloak.url, teams=site.teams,
                                                     adopt=site.adopt, provider=providers.keycloak))
monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
           "metadata": {"name": "kueue", "namespace": "kueue-system"},
           "spec": {"selector": {"matchLabels": {"control-plane": "controller-manager"}}, "endpoints": [{"port": "https"}]}}
rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": {"name": "fab-gpu", "namespace": "monitoring"},
        "spec": {"groups": [{"name": "gpu", "rules": [{"alert": "GpuLost", "expr": "DCGM_FI_DEV_XID_ERRORS > 0"}]}]}}
dashboard = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "fab-gpu-use", "namespace": "monitoring", "labels": {"grafana_dashboard": "1"}},
             "data": {"gpu-use.json": "{}"}}
SiteObservability("observability", SiteObservabilityArgs(
    site=SiteRef.of(site), clusters=providers.clusters, config=site.observability, adopt=site.adopt, network=network,
    identity=identity, teams=sorted(site.teams), receiver_pool=receiver_pool(site),
    objects={"gpu": [monitor, rule], "compute": [dashboard]},
))
