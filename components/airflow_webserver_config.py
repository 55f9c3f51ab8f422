"""Airflow API server sign-in through the site's Keycloak (FAB auth manager); shipped as the chart's apiServerConfig.

Client id, secret and issuer come from the environment (the Secret `airflow-oidc`), never from this file.
Keycloak's `groups` claim decides the role: platform admins get Admin, team members get User.
"""

import os

import jwt
from airflow.providers.fab.auth_manager.security_manager.override import FabAirflowSecurityManagerOverride
from flask_appbuilder.security.manager import AUTH_OAUTH

ISSUER = os.environ["OIDC_ISSUER"]

AUTH_TYPE = AUTH_OAUTH
AUTH_USER_REGISTRATION = True
AUTH_USER_REGISTRATION_ROLE = "Viewer"
AUTH_ROLES_SYNC_AT_LOGIN = True
AUTH_ROLES_MAPPING = {"platform-admins": ["Admin"], "team-members": ["User"]}

OAUTH_PROVIDERS = [
    {
        "name": "keycloak",
        "icon": "fa-key",
        "token_key": "access_token",
        "remote_app": {
            "client_id": os.environ["OIDC_CLIENT_ID"],
            "client_secret": os.environ["OIDC_CLIENT_SECRET"],
            "server_metadata_url": f"{ISSUER}/.well-known/openid-configuration",
            "api_base_url": f"{ISSUER}/protocol/",
            "client_kwargs": {"scope": "openid email profile"},
        },
    }
]


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
