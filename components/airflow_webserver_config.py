"""Airflow's part of its API server config (the chart's apiServerConfig), after components/flask_keycloak_oauth.py.

Keycloak's `groups` claim decides the role: platform admins get Admin, team members get User.
"""
# ISSUER comes from the Keycloak part this file is appended to.
# ruff: noqa: F821

import jwt
from airflow.providers.fab.auth_manager.security_manager.override import FabAirflowSecurityManagerOverride

AUTH_USER_REGISTRATION_ROLE = "Viewer"
AUTH_ROLES_MAPPING = {"platform-admins": ["Admin"], "team-members": ["User"]}


class KeycloakSecurityManager(FabAirflowSecurityManagerOverride):
    """Map the verified token's claims to an Airflow user; any `team-*` group counts as a team member."""

    def get_oauth_user_info(self, provider, response):
        token = response["access_token"]
        jwks = jwt.PyJWKClient(f"{ISSUER}/protocol/openid-connect/certs")
        claims = jwt.decode(
            token, jwks.get_signing_key_from_jwt(token).key, algorithms=["RS256"], options={"verify_aud": False}, issuer=ISSUER
        )
        groups = claims.get("groups", [])
        roles = ["platform-admins"] if "platform-admins" in groups else []
        if any(g.startswith("team-") for g in groups):
            roles.append("team-members")
        return {
            "username": claims["preferred_username"],
            "email": claims.get("email", ""),
            "first_name": claims.get("given_name", ""),
            "last_name": claims.get("family_name", ""),
            "role_keys": roles,
        }


SECURITY_MANAGER_CLASS = KeycloakSecurityManager
