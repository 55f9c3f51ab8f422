# Superset sign-in through the site's Keycloak (Flask-AppBuilder AUTH_OAUTH); shipped as configOverrides.fab.
# Client id, secret and issuer come from the environment (the Secret `superset-oidc`), never from this file.
# No Redis: caches are in-process and there is no Celery worker (no async queries).
import os

from flask_appbuilder.security.manager import AUTH_OAUTH

SECRET_KEY = os.environ["SUPERSET_SECRET_KEY"]
ENABLE_PROXY_FIX = True
CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 300}
DATA_CACHE_CONFIG = CACHE_CONFIG

_ISSUER = os.environ["OIDC_ISSUER"]
AUTH_TYPE = AUTH_OAUTH
AUTH_USER_REGISTRATION = True
AUTH_USER_REGISTRATION_ROLE = "Public"
AUTH_ROLES_SYNC_AT_LOGIN = True
AUTH_ROLES_MAPPING = {"platform-admins": ["Admin"]}
OAUTH_PROVIDERS = [
    {
        "name": "keycloak",
        "icon": "fa-key",
        "token_key": "access_token",
        "remote_app": {
            "client_id": os.environ["OIDC_CLIENT_ID"],
            "client_secret": os.environ["OIDC_CLIENT_SECRET"],
            "server_metadata_url": f"{_ISSUER}/.well-known/openid-configuration",
            "api_base_url": f"{_ISSUER}/protocol/",
            "client_kwargs": {"scope": "openid profile email"},
        },
    }
]
