"""Airflow's part of its API server config (the chart's apiServerConfig), after components/flask_keycloak_oauth.py and
the team roles the platform writes between them (`TEAM_ROLES`, components/engines/airflow.py).

Keycloak's `groups` claim decides the roles: platform admins get Admin; a member of a team's group `team-<team>` gets
the Airflow role of the same name, and nothing else. That role may use Airflow but holds no permission on `DAGs` as a
whole: it reads and triggers only the DAGs whose `access_control` names it (the team's serving loop,
components/dags/serving_loop.py). A signed-in user of no team gets Public, which sees nothing.
"""
# ISSUER and TEAM_ROLES come from the parts this file is appended to.
# ruff: noqa: F821

import jwt
from airflow.providers.fab.auth_manager.security_manager.override import FabAirflowSecurityManagerOverride

AUTH_USER_REGISTRATION_ROLE = "Public"
AUTH_ROLES_MAPPING = {"platform-admins": ["Admin"], **{role: [role] for role in TEAM_ROLES}}

TEAM_EXCLUDED_RESOURCES = ("DAGs",)
"""Every DAG at once (read, edit, delete): a team's role has each only on its own DAGs, through their access_control."""
TEAM_EXCLUDED_PERMISSIONS = (("can_create", "Assets"),)
"""An asset event starts every DAG scheduled on that asset, whoever's it is."""


def team_permissions(viewer, user):
    """What a team's role holds besides its DAGs' own permissions: the User role's, without `DAGs` as a whole and without
    creating asset events. The sub-entities (runs, task instances, logs) are checked together with the DAG they belong
    to, so they reach no further than the DAGs the role may read."""
    return [p for p in [*viewer, *user] if p[1] not in TEAM_EXCLUDED_RESOURCES and p not in TEAM_EXCLUDED_PERMISSIONS]


class KeycloakSecurityManager(FabAirflowSecurityManagerOverride):
    """Map the verified token's claims to an Airflow user: its platform-admins and team groups are its role keys."""

    def sync_roles(self):
        """Airflow's roles (at every API server start and `airflow sync-perm`), then each team's role, which the DAGs'
        access_control name (the DAG processor refuses a role that does not exist)."""
        super().sync_roles()
        permissions = team_permissions(self.VIEWER_PERMISSIONS, self.USER_PERMISSIONS)
        self.bulk_sync_roles([{"role": role, "perms": permissions} for role in TEAM_ROLES])

    def get_oauth_user_info(self, provider, response):
        token = response["access_token"]
        jwks = jwt.PyJWKClient(f"{ISSUER}/protocol/openid-connect/certs")
        claims = jwt.decode(
            token, jwks.get_signing_key_from_jwt(token).key, algorithms=["RS256"], options={"verify_aud": False}, issuer=ISSUER
        )
        groups = claims.get("groups", [])
        return {
            "username": claims["preferred_username"],
            "email": claims.get("email", ""),
            "first_name": claims.get("given_name", ""),
            "last_name": claims.get("family_name", ""),
            "role_keys": sorted(g for g in groups if g in AUTH_ROLES_MAPPING),
        }


SECURITY_MANAGER_CLASS = KeycloakSecurityManager
