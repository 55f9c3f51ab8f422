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
    override.FabAirflowSecurityManagerOverride = FabStub
    for name, module in {"flask_appbuilder.security.manager": manager, "jwt": types.ModuleType("jwt"),
                         "airflow.providers.fab.auth_manager.security_manager.override": override}.items():
        monkeypatch.setitem(sys.modules, name, module)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


class FabStub:
    """The FAB provider's security manager as far as the config uses it: a few of its Viewer and User permissions
    (apache-airflow-providers-fab 3.10.2, security_manager/override.py) and the roles `bulk_sync_roles` syncs."""

    VIEWER_PERMISSIONS = [("can_read", "DAGs"), ("can_read", "DAG Runs"), ("can_read", "Task Instances"), ("can_read", "Website")]
    USER_PERMISSIONS = [("can_edit", "DAGs"), ("can_delete", "DAGs"), ("can_create", "DAG Runs"), ("can_create", "Assets")]

    def __init__(self):
        self.synced: list = []

    def sync_roles(self):
        self.synced.append("airflow's roles")

    def bulk_sync_roles(self, roles):
        self.synced.extend(roles)


def _run(part: str, settings: dict | None = None) -> dict:
    namespace: dict = {}
    exec(compile(flask_oauth_config(COMPONENTS / part, settings), part, "exec"), namespace)
    return namespace


TEAMS = {"TEAM_ROLES": ("team-fdc", "team-yield")}


def test_airflow_signs_in_through_keycloak_and_maps_each_team_group_to_its_own_role(flask_stubs):
    config = _run("airflow_webserver_config.py", TEAMS)
    (provider,) = config["OAUTH_PROVIDERS"]
    assert (config["AUTH_TYPE"], provider["name"], provider["remote_app"]["client_id"]) == (4, "keycloak", "app")
    assert provider["remote_app"]["server_metadata_url"] == "https://kc.example/realms/fab/.well-known/openid-configuration"
    assert config["AUTH_ROLES_MAPPING"] == {"platform-admins": ["Admin"], "team-fdc": ["team-fdc"], "team-yield": ["team-yield"]}
    assert config["SECURITY_MANAGER_CLASS"].__name__ == "KeycloakSecurityManager"


def test_a_user_of_no_team_gets_the_role_that_sees_nothing(flask_stubs):
    assert _run("airflow_webserver_config.py", TEAMS)["AUTH_USER_REGISTRATION_ROLE"] == "Public"


def test_a_teams_role_holds_no_permission_on_every_dag_at_once(flask_stubs):
    manager = _run("airflow_webserver_config.py", TEAMS)["KeycloakSecurityManager"]()
    manager.sync_roles()
    permissions = [("can_read", "DAG Runs"), ("can_read", "Task Instances"), ("can_read", "Website"), ("can_create", "DAG Runs")]
    assert manager.synced == ["airflow's roles", {"role": "team-fdc", "perms": permissions},
                              {"role": "team-yield", "perms": permissions}]


def test_only_the_platform_admin_and_team_groups_become_role_keys(flask_stubs, monkeypatch):
    config = _run("airflow_webserver_config.py", TEAMS)
    claims = {"preferred_username": "ana", "groups": ["team-yield", "team-other", "platform-users", "platform-admins"]}
    jwt = sys.modules["jwt"]
    monkeypatch.setattr(jwt, "PyJWKClient", lambda url: types.SimpleNamespace(get_signing_key_from_jwt=lambda t: types.SimpleNamespace(key="k")), raising=False)
    monkeypatch.setattr(jwt, "decode", lambda *a, **k: claims, raising=False)
    info = config["KeycloakSecurityManager"]().get_oauth_user_info("keycloak", {"access_token": "t"})
    assert info["role_keys"] == ["platform-admins", "team-yield"]


def test_superset_signs_in_through_keycloak_and_only_admins_get_a_role(flask_stubs):
    config = _run("superset_config_overrides.py")
    (provider,) = config["OAUTH_PROVIDERS"]
    assert (provider["remote_app"]["client_id"], provider["remote_app"]["client_secret"]) == ("app", "s3cret")
    assert config["AUTH_ROLES_MAPPING"] == {"platform-admins": ["Admin"]}
    assert config["AUTH_USER_REGISTRATION_ROLE"] == "Public"
