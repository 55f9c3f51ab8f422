"""SiteIdentity: the platform's objects in the site's Keycloak (DESIGN sections 1 and 4).

The realm (referenced, or created and protected), one group per team, the `groups` client scope
that puts team membership into tokens, and `oidc_client()`, which every component uses for its
sign-in or service credentials: always confidential, exact redirect URIs, PKCE for browsers,
client credentials for services, secrets only as Pulumi secrets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import pulumi
import pulumi_keycloak as keycloak

from components.config import AdoptConfig, IdentityConfig, Team, names
from components.kube import adopted

GROUPS_SCOPE = "groups"
PLATFORM_USERS = "platform-users"
"""Everyone who may sign in to the interactive UIs (JupyterHub), independent of team membership."""
PLATFORM_ADMINS = "platform-admins"
"""The platform's administrators: Airflow's and Superset's Admin role (their config files name it), and the right to sync
the serving Applications in Argo CD. The site keeps this group and its members in its realm; the program does not create
it."""
REALM_MANAGEMENT = "realm-management"
"""The client of every Keycloak realm whose roles (`view-users`, `query-groups`, ...) grant its admin API."""
BASE_SCOPES = ("basic", "profile", "email", "roles", "web-origins", "acr")
"""Keycloak's built-in default scopes that every platform client keeps."""


def team_group_name(team: str) -> str:
    return names.TEAM_GROUP(team)


def check_redirect_uris(client: str, uris: list[str]) -> None:
    """Redirect URIs must be exact https URLs: no wildcards, no plain http, no fragments."""
    if not uris:
        raise ValueError(f"OIDC client {client!r}: a browser client needs at least one exact redirect URI")
    for uri in uris:
        parts = urlsplit(uri)
        if "*" in uri or parts.scheme != "https" or not parts.hostname or parts.fragment:
            raise ValueError(
                f"OIDC client {client!r}: redirect URI {uri!r} must be an exact https URL without wildcards or fragments"
            )


@dataclass(frozen=True)
class SiteIdentityArgs:
    config: IdentityConfig
    """The `identity` section: the realm, and whether the program creates it."""
    keycloak_url: str
    """The site's Keycloak, whose realm URL is the OIDC issuer."""
    teams: dict[str, Team]
    """The teams, each of which gets a group."""
    adopt: AdoptConfig
    """Declares whether a realm to create exists already."""
    provider: keycloak.Provider
    """The provider of the site's Keycloak."""


@dataclass(frozen=True)
class OidcClient:
    """What a component needs of its Keycloak client."""

    client: keycloak.openid.Client
    client_id: pulumi.Output[str]
    client_secret: pulumi.Output[str]
    issuer_url: str


class SiteIdentity(pulumi.ComponentResource):
    """The platform's realm objects: team groups, client scopes and OIDC clients."""

    realm_id: pulumi.Output[str]
    """The realm every platform object lives in."""
    issuer_url: pulumi.Output[str]
    """OIDC issuer of the realm, which gateways and services verify tokens against."""
    team_groups: pulumi.Output[dict[str, str]]
    """Keycloak group name per team."""

    def __init__(self, name: str, args: SiteIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "fab:identity:SiteIdentity", name, None, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.provider]))
        )
        self._name = name
        realm = args.config.realm
        self._issuer = f"{args.keycloak_url.rstrip('/')}/realms/{realm}"
        self.issuer = self._issuer
        """The realm's OIDC issuer as a plain string, for configuration that needs it at render time."""
        child = pulumi.ResourceOptions(parent=self)

        if args.config.create_realm:
            self.realm = keycloak.Realm(
                f"{name}-realm",
                realm=realm,
                enabled=True,
                ssl_required="all",
                registration_allowed=False,
                # The realm holds every user and group of the site: never deleted by a stack change.
                opts=pulumi.ResourceOptions.merge(
                    pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True, retain_on_delete=True)),
                    adopted(args.adopt.claims("realm"), realm),
                ),
            )
            realm_id: pulumi.Input[str] = self.realm.id
        else:
            realm_id = realm
        self._realm_id = pulumi.Output.from_input(realm_id)

        self.groups = {
            team: keycloak.Group(
                f"{name}-team-{team}",
                realm_id=realm_id,
                name=team_group_name(team),
                description=spec.description or None,
                opts=child,
            )
            for team, spec in sorted(args.teams.items())
        }
        self.platform_users = keycloak.Group(
            f"{name}-group-{PLATFORM_USERS}",
            realm_id=realm_id,
            name=PLATFORM_USERS,
            description="May sign in to the platform's interactive UIs.",
            opts=child,
        )
        self.groups_scope = keycloak.openid.ClientScope(
            f"{name}-scope-{GROUPS_SCOPE}",
            realm_id=realm_id,
            name=GROUPS_SCOPE,
            description="Team groups of the user or service, as the `groups` claim.",
            include_in_token_scope=True,
            opts=child,
        )
        keycloak.openid.GroupMembershipProtocolMapper(
            f"{name}-scope-{GROUPS_SCOPE}-mapper",
            realm_id=realm_id,
            client_scope_id=self.groups_scope.id,
            name=GROUPS_SCOPE,
            claim_name=GROUPS_SCOPE,
            full_path=False,
            add_to_id_token=True,
            add_to_access_token=True,
            add_to_userinfo=True,
            opts=child,
        )

        self._realm_input = realm_id
        self.realm_id = self._realm_id
        self.issuer_url = pulumi.Output.from_input(self._issuer)
        self.team_groups = pulumi.Output.from_input({team: team_group_name(team) for team in sorted(args.teams)})
        self.register_outputs({"realm_id": self.realm_id, "issuer_url": self.issuer_url, "team_groups": self.team_groups})

    def group(self, group: str, description: str) -> keycloak.Group:
        """A group of the realm besides the teams' (a peer site's team that trains here), whose members a group's
        RoleBinding names (`<group prefix><group>`)."""
        return keycloak.Group(f"{self._name}-group-{group}", realm_id=self._realm_input, name=group, description=description,
                              opts=pulumi.ResourceOptions(parent=self))

    def oidc_client(
        self,
        key: str,
        kind: Literal["browser", "service"],
        redirect_uris: list[str] | None = None,
        description: str = "",
        audience: str | None = None,
        claims: dict[str, str] | None = None,
    ) -> OidcClient:
        """A confidential OIDC client named `key`: browser sign-in (PKCE, exact redirect URIs) or service (client credentials).

        `audience` adds that audience to its access tokens (so a token for one service cannot be replayed at
        another); `claims` adds fixed claims, such as the team a service client acts for.
        """
        uris = list(redirect_uris or [])
        if kind == "browser":
            check_redirect_uris(key, uris)
        elif uris:
            raise ValueError(f"OIDC client {key!r}: a service client uses client credentials and takes no redirect URIs")
        browser = kind == "browser"
        origins = sorted({f"{urlsplit(u).scheme}://{urlsplit(u).netloc}" for u in uris})
        client = keycloak.openid.Client(
            f"{self._name}-client-{key}",
            realm_id=self._realm_id,
            client_id=key,
            name=key,
            description=description or None,
            enabled=True,
            access_type="CONFIDENTIAL",
            standard_flow_enabled=browser,
            pkce_code_challenge_method="S256" if browser else None,
            valid_redirect_uris=uris if browser else None,
            valid_post_logout_redirect_uris=origins if browser else None,
            web_origins=origins if browser else None,
            service_accounts_enabled=not browser,
            implicit_flow_enabled=False,
            direct_access_grants_enabled=False,
            full_scope_allowed=False,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["client_secret"]),
        )
        keycloak.openid.ClientDefaultScopes(
            f"{self._name}-client-{key}-scopes",
            realm_id=self._realm_id,
            client_id=client.id,
            default_scopes=[*BASE_SCOPES, GROUPS_SCOPE],
            # The groups scope is named here by its name: Keycloak sets only a scope the realm has.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.groups_scope]),
        )
        # Audience and fixed claims go into access tokens only, which is what services verify.
        access_token_only: dict[str, Any] = {
            "realm_id": self._realm_id, "client_id": client.id, "add_to_access_token": True, "add_to_id_token": False,
            "opts": pulumi.ResourceOptions(parent=self),
        }
        if audience:
            keycloak.openid.AudienceProtocolMapper(
                f"{self._name}-client-{key}-audience", name=f"audience-{audience}", included_custom_audience=audience, **access_token_only,
            )
        for claim, value in sorted((claims or {}).items()):
            keycloak.openid.HardcodedClaimProtocolMapper(
                f"{self._name}-client-{key}-claim-{claim}", name=f"claim-{claim}", claim_name=claim, claim_value=value,
                claim_value_type="String", add_to_userinfo=False, **access_token_only,
            )
        return OidcClient(
            client=client,
            client_id=client.client_id,
            client_secret=pulumi.Output.secret(client.client_secret),
            issuer_url=self._issuer,
        )

    def realm_management_roles(self, key: str, client: OidcClient, roles: list[str]) -> list[keycloak.openid.ClientServiceAccountRole]:
        """Give the service account of `client` (a service client of `oidc_client`, named `key`) these roles of the realm's
        `realm-management` client, and no other: an admin API reader such as Trino's group sync (`view-users`,
        `query-groups`). `realm-management` is the client every realm has; its id is looked up in the realm."""
        realm_management = keycloak.openid.get_client_output(realm_id=self._realm_id, client_id=REALM_MANAGEMENT,
                                                             opts=pulumi.InvokeOutputOptions(parent=self))
        return [
            keycloak.openid.ClientServiceAccountRole(
                f"{self._name}-client-{key}-{role}", realm_id=self._realm_id, client_id=realm_management.id,
                service_account_user_id=client.client.service_account_user_id, role=role,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in roles
        ]

