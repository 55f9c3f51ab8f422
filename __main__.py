"""fab-platform: one fab site as a Pulumi stack (DESIGN section 2): config, providers, components, exports."""

import pulumi

from components.config import load_site
from components.network import CrossClusterNetwork, CrossClusterNetworkArgs
from components.providers import site_providers

site = load_site()
providers = site_providers(site)

network = CrossClusterNetwork("network", CrossClusterNetworkArgs(site=site, providers=providers))

pulumi.export("site", {"name": site.name, "domain": site.domain})
pulumi.export("network", {"clusters": network.clusters, "flows": network.flows})
