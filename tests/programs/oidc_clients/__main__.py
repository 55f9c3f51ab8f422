"""A test program: SiteIdentity with one browser and one service client, rendered by tests/components/test_identity.py."""

import pulumi

import components.catalog  # noqa: F401  (declares the engines and their flows to the config before the site is parsed)
from components.config import load_site
from components.identity import SiteIdentity, SiteIdentityArgs
from components.providers import site_providers

site = load_site()
identity = SiteIdentity("identity", SiteIdentityArgs(config=site.identity, keycloak_url=site.keycloak.url, teams=site.teams,
                                                     adopt=site.adopt, provider=site_providers(site).keycloak))
superset = identity.oidc_client("superset", "browser", ["https://superset.site-t.fab.internal/oauth-authorized/keycloak"])
airflow = identity.oidc_client("airflow-gpu-submitter", "service")
pulumi.export("secret", superset.client_secret)
