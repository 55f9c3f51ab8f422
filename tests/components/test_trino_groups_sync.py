"""The Trino group sync script (components/trino_groups_sync.py), run in process against a fake Keycloak admin API and a
fake Kubernetes API (tests/fake_http.py): the exact `group.db` it writes into the Secret `trino-groups`, users in several
groups, a group the realm lacks, paging, disabled users, and a user or group removed in Keycloak leaving the file."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_http import serving

from components import trino_groups_sync

REALM = "fab"
RULE_GROUPS = ["platform-admins", "team-fdc", "team-yield", "erp-readers"]
"""The groups Trino's rules name, as the CronJob hands them over (`GROUPS`)."""


class FakeSite:
    """Keycloak's token and admin endpoints of realm `fab`, and the Secret `trino/trino-groups` of the Kubernetes API."""

    def __init__(self, groups: dict[str, list[str]], disabled: tuple[str, ...] = ()):
        self.groups, self.disabled = groups, set(disabled)
        self.data: dict[str, str] = {"group.db": ""}
        self.patches: list[dict[str, Any]] = []

    def handle(self, method: str, path: str, body: dict[str, Any], headers: Any) -> tuple[int, Any]:
        url = urlsplit(path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if method == "POST" and url.path == f"/realms/{REALM}/protocol/openid-connect/token":
            return 200, {"access_token": "kc-token", "token_type": "Bearer"}
        if url.path.startswith(f"/admin/realms/{REALM}/"):
            if headers.get("Authorization") != "Bearer kc-token":
                return 401, {"error": "HTTP 401 Unauthorized"}
            rest = url.path.removeprefix(f"/admin/realms/{REALM}/")
            if method == "GET" and rest.startswith("group-by-path/"):
                name = rest.removeprefix("group-by-path/")
                if name not in self.groups:
                    return 404, {"error": "Group path does not exist"}
                return 200, {"id": f"id-{name}", "name": name, "path": f"/{name}"}
            if method == "GET" and rest.startswith("groups/id-") and rest.endswith("/members"):
                users = self.groups[rest.removeprefix("groups/id-").removesuffix("/members")]
                assert query["briefRepresentation"] == "true"
                first, most = int(query["first"]), int(query["max"])
                return 200, [{"id": f"u-{u}", "username": u, "enabled": u not in self.disabled} for u in users[first:first + most]]
        if url.path == "/api/v1/namespaces/trino/secrets/trino-groups":
            if headers.get("Authorization") != "Bearer kube-token":
                return 401, {"kind": "Status", "code": 401}
            if method == "PATCH":
                assert headers.get("Content-Type") == "application/merge-patch+json"
                self.patches.append(body)
                self.data.update(body["data"])
            return 200, {"kind": "Secret", "metadata": {"name": "trino-groups", "namespace": "trino"}, "data": dict(self.data)}
        return 404, {"error": f"unexpected {method} {path}"}

    def group_db(self) -> str:
        return base64.b64decode(self.data["group.db"]).decode()


def run(site: FakeSite, groups: list[str] = RULE_GROUPS) -> bool:
    with serving(site) as url:
        return trino_groups_sync.sync(url, REALM, "trino-groups-sync", "client-secret", groups, url, "kube-token", "trino",
                                      "trino-groups", None, None)


def test_writes_a_line_per_named_group_with_its_members_sorted():
    site = FakeSite({"team-yield": ["bo", "ana"], "team-fdc": ["fred"], "platform-admins": ["root"], "erp-readers": ["fred"]})
    assert run(site) is True
    assert site.group_db() == "erp-readers:fred\nplatform-admins:root\nteam-fdc:fred\nteam-yield:ana,bo\n"


def test_a_user_in_several_groups_is_on_each_groups_line():
    site = FakeSite({"team-yield": ["ana"], "team-fdc": ["ana", "fred"], "platform-admins": ["ana"], "erp-readers": []})
    run(site)
    assert site.group_db() == "platform-admins:ana\nteam-fdc:ana,fred\nteam-yield:ana\n"


def test_groups_the_rules_do_not_name_are_left_out():
    site = FakeSite({"team-yield": ["ana"], "team-other": ["zed"], "realm-admins": ["root"]})
    run(site)
    assert site.group_db() == "team-yield:ana\n"


def test_a_group_the_realm_lacks_gets_no_line(capsys):
    site = FakeSite({"team-yield": ["ana"]})
    run(site, ["platform-admins", "team-yield"])
    assert site.group_db() == "team-yield:ana\n"
    assert "group 'platform-admins' is not in realm 'fab': no line for it" in capsys.readouterr().err


def test_disabled_users_are_left_out():
    site = FakeSite({"team-yield": ["ana", "bo"]}, disabled=("bo",))
    run(site, ["team-yield"])
    assert site.group_db() == "team-yield:ana\n"


def test_members_are_read_page_by_page():
    users = [f"user{i:03d}" for i in range(trino_groups_sync.PAGE * 2 + 5)]
    site = FakeSite({"team-yield": users})
    run(site, ["team-yield"])
    assert site.group_db() == f"team-yield:{','.join(users)}\n"


def test_a_user_removed_from_a_group_leaves_its_line_at_the_next_run():
    site = FakeSite({"team-yield": ["ana", "bo"], "team-fdc": ["bo"]})
    run(site)
    site.groups["team-yield"].remove("bo")
    assert run(site) is True
    assert site.group_db() == "team-fdc:bo\nteam-yield:ana\n"


def test_a_group_removed_from_the_realm_leaves_the_file_at_the_next_run():
    site = FakeSite({"team-yield": ["ana"], "team-fdc": ["bo"]})
    run(site)
    del site.groups["team-fdc"]
    run(site)
    assert site.group_db() == "team-yield:ana\n"


def test_an_unchanged_file_is_not_written_again():
    site = FakeSite({"team-yield": ["ana"]})
    run(site)
    assert run(site) is False
    assert len(site.patches) == 1
