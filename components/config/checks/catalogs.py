"""Cross-field checks of Trino's external catalogs (DESIGN section 1, supply chain: Trino federates external databases
with Iceberg): a catalog name no other catalog of Trino has, the database's address outside the site, and the
connection fields its connector needs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.config import names
from components.config.checks.network import site_ranges
from components.config.problems import Problem, format_path
from components.config.schema.storage import GOLD_NAMESPACE as GOLD_SCHEMA

if TYPE_CHECKING:
    from components.config.views import SiteViews

NEEDS_DATABASE = {"postgresql": "the database", "oracle": "the service name", "sqlserver": "the database"}
"""Connectors whose JDBC URL names a database (Oracle: a service); mysql's names none."""
RESERVED = ("system",)
"""Catalog names Trino keeps for itself."""


def _unknown_team_groups(site: SiteViews, path: tuple, groups: list[str]) -> Iterator[Problem]:
    """A `team-<team>` group of a team the site does not have: Trino would grant it to whoever is put in that group."""
    prefix = names.TEAM_GROUP("")
    for i, group in enumerate(groups):
        team = group.removeprefix(prefix)
        if group.startswith(prefix) and team not in site.teams:
            yield (*path, i), (f"{group!r} is the group of team {team!r}, which is not among teams "
                               f"({', '.join(sorted(site.teams)) or 'none'}); name a team of the site or another group")


def trino_reader_problems(site: SiteViews) -> Iterator[Problem]:
    """Who reads what in Trino: the teams of `team_schemas` and the team groups of the external and peer catalogs exist."""
    for team, schemas in sorted(site.compute.trino.team_schemas.items()):
        path = ("compute", "trino", "team_schemas", team)
        if team not in site.teams:
            yield path, f"{team!r} is not among teams ({', '.join(sorted(site.teams)) or 'none'}); name a team of the site"
        for i, schema in enumerate(schemas):
            if schema in (names.team_schema(team), GOLD_SCHEMA):
                yield (*path, i), f"{schema!r} is read by team {team} already (its own schema and gold); remove it"
    for name, catalog in sorted(site.compute.trino.external_catalogs.items()):
        yield from _unknown_team_groups(site, ("compute", "trino", "external_catalogs", name, "groups"), catalog.groups)
    for peer, config in sorted(site.federation.peers.items()):
        yield from _unknown_team_groups(site, ("federation", "peers", peer, "trino_groups"), config.trino_groups)


def external_catalog_problems(site: SiteViews) -> Iterator[Problem]:
    trino = site.compute.trino
    base = ("compute", "trino", "external_catalogs")
    if trino.external_catalogs and not trino.enabled:
        yield base, "needs Trino: compute.trino.enabled is false; enable Trino or remove the external catalogs"
        return
    taken = {names.LAKE_CATALOG: "Trino's catalog on this site's Polaris",
             **{names.peer_trino_catalog(peer): f"Trino's catalog on federated peer {peer}'s Polaris"
                for peer in site.federation.peers},
             **{name: "a catalog Trino keeps for itself" for name in RESERVED}}
    ranges = list(site_ranges(site))
    for name, catalog in sorted(trino.external_catalogs.items()):
        path = (*base, name)
        if name in taken:
            yield path, f"{name!r} is already {taken[name]}; name the external catalog differently"
            continue
        flow = names.external_catalog_flow(name)
        if site.flows is not None and flow in site.flows:
            yield ("flows", flow), (f"is the name of catalog {name}'s egress flow, which the program derives from "
                                    f"{format_path(path)}; rename this flow")
        if catalog.database is None and catalog.connector in NEEDS_DATABASE:
            yield (*path, "database"), (f"is required for the {catalog.connector} connector: name "
                                        f"{NEEDS_DATABASE[catalog.connector]} Trino reads")
        elif catalog.database is not None and catalog.connector not in NEEDS_DATABASE:
            yield (*path, "database"), (f"is not used by the {catalog.connector} connector (its catalog shows every "
                                        "database of the server); remove it")
        if catalog.trust_site_ca and catalog.connector != "sqlserver":
            yield (*path, "trust_site_ca"), (f"is for the sqlserver connector only, not {catalog.connector} (its certificate "
                                             "settings are its connection properties); remove it")
        elif catalog.trust_site_ca and site.ca_bundle is None:
            yield (*path, "trust_site_ca"), "needs the site's CA: set ca_bundle (the PEM file of the site's PKI) or remove it"
        for i, cidr in enumerate(catalog.cidrs):
            inside = next(((where, net) for where, net in ranges if cidr.overlaps(net)), None)
            if inside is not None:
                where, net = inside
                yield (*path, "cidrs", i), (f"{cidr} overlaps {format_path(where)} ({net}); an external database is "
                                            "outside every range of the site")
        try:
            address = ipaddress.IPv4Address(catalog.host)
        except ValueError:
            continue
        if not any(address in cidr for cidr in catalog.cidrs):
            yield (*path, "host"), (f"{address} is in none of cidrs ({', '.join(map(str, catalog.cidrs))}); Trino may reach "
                                    "only those: add its range")
