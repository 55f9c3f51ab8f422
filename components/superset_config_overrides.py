"""Superset's part of its config overrides (configOverrides.fab), after components/flask_keycloak_oauth.py.

No Redis: caches are in-process and there is no Celery worker (no async queries).
"""

import os

SECRET_KEY = os.environ["SUPERSET_SECRET_KEY"]
ENABLE_PROXY_FIX = True
CACHE_CONFIG = {"CACHE_TYPE": "SimpleCache", "CACHE_DEFAULT_TIMEOUT": 300}
DATA_CACHE_CONFIG = CACHE_CONFIG

AUTH_USER_REGISTRATION_ROLE = "Public"
AUTH_ROLES_MAPPING = {"platform-admins": ["Admin"]}
