"""Sign-in through the site's Keycloak for a Flask-AppBuilder app (Airflow's FAB auth manager, Superset).

The first part of each app's config file: components/engines composes it with the app's own part, which
sets the roles. Client id, secret and issuer come from the environment (the app's Secret `<app>-oidc`),
never from the file.
"""

import os

from flask_appbuilder.security.manager import AUTH_OAUTH

ISSUER = os.environ["OIDC_ISSUER"]

AUTH_TYPE = AUTH_OAUTH
AUTH_USER_REGISTRATION = True
AUTH_ROLES_SYNC_AT_LOGIN = True

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
