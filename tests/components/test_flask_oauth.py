"""The Flask-AppBuilder config files Airflow and Superset receive: the shared Keycloak sign-in, then each app's roles."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from components.engines._base import flask_oauth_config

COMPONENTS = Path(__file__).parents[2] / "components"
ENV = {"OIDC_ISSUER": "https://kc.example/realms/fab", "OIDC_CLIENT_ID": "app", "OIDC_CLIENT_SECRET": "s3cret",
       "SUPERSET_SECRET_KEY": "k"}


@pytest.fixture
def flask_stubs(monkeypatch):
    """The modules the files import inside the apps' images, stubbed: only their names are used at import."""
    manager = types.ModuleType("flask_appbuilder.security.manager")
    manager.AUTH_OAUTH = 4
    override = types.ModuleType("airflow.providers.fab.auth_manager.security_manager.override")
    override.FabAirflowSecurityManagerOverride = type("FabAirflowSecurityManagerOverride", (), {})
    for name, module in {"flask_appbuilder.security.manager": manager, "jwt": types.ModuleType("jwt"),
                         "airflow.providers.fab.auth_manager.security_manager.override": override}.items():
        monkeypatch.setitem(sys.modules, name, module)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


def _run(part: str) -> dict:
    namespace: dict = {}
    exec(compile(flask_oauth_config(COMPONENTS / part), part, "exec"), namespace)
    return namespace


def test_airflow_signs_in_through_keycloak_and_maps_team_groups_to_user(flask_stubs):
    config = _run("airflow_webserver_config.py")
    (provider,) = config["OAUTH_PROVIDERS"]
    assert (config["AUTH_TYPE"], provider["name"], provider["remote_app"]["client_id"]) == (4, "keycloak", "app")
    assert provider["remote_app"]["server_metadata_url"] == "https://kc.example/realms/fab/.well-known/openid-configuration"
    assert config["AUTH_ROLES_MAPPING"] == {"platform-admins": ["Admin"], "team-members": ["User"]}
    assert config["SECURITY_MANAGER_CLASS"].__name__ == "KeycloakSecurityManager"


def test_superset_signs_in_through_keycloak_and_only_admins_get_a_role(flask_stubs):
    config = _run("superset_config_overrides.py")
    (provider,) = config["OAUTH_PROVIDERS"]
    assert (provider["remote_app"]["client_id"], provider["remote_app"]["client_secret"]) == ("app", "s3cret")
    assert config["AUTH_ROLES_MAPPING"] == {"platform-admins": ["Admin"]}
    assert config["AUTH_USER_REGISTRATION_ROLE"] == "Public"
