"""Keeps Trino's group file from Keycloak (components/engines/trino.py, `_groups_sync`): run by the CronJob
`trino-groups-sync` in Trino's namespace, standard library only.

Trino 480 reads no groups from the OAuth2 token, so its file group provider's Secret (`trino-groups`, key `group.db`) is
written here: for each group Trino's rules name (`GROUPS`, comma-separated), its enabled direct members' usernames (Trino's
user is the token's `preferred_username`, the Keycloak username), a line `group:user,user` per group with members, groups
and users sorted. A group the realm lacks, or one without members, gets no line. The whole file is rewritten from
Keycloak on every run, so a user removed from a group (or a group removed) leaves the file at the next run.

Keycloak: the client credentials of the realm client `trino-groups-sync`, whose service account holds realm-management's
`view-users` and `query-groups` only: it reads groups and their members, nothing else, and changes nothing. Kubernetes:
the pod's ServiceAccount may `get` and `patch` that one Secret (a Role by `resourceNames`); the Secret is patched only
when its content changes."""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

PAGE = 100
"""Members fetched per request (`first`/`max` paging of the group members endpoint)."""
GROUP_FILE_KEY = "group.db"


def _call(url: str, context: ssl.SSLContext | None, method: str = "GET", token: str | None = None,
          body: bytes | None = None, content_type: str | None = None) -> Any:
    request = urllib.request.Request(url, data=body, method=method)
    request.add_header("Accept", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if content_type:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def keycloak_token(keycloak: str, realm: str, client_id: str, client_secret: str, context: ssl.SSLContext | None) -> str:
    """An access token of the sync client (client credentials)."""
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret})
    url = f"{keycloak.rstrip('/')}/realms/{urllib.parse.quote(realm)}/protocol/openid-connect/token"
    return _call(url, context, "POST", body=form.encode(), content_type="application/x-www-form-urlencoded")["access_token"]


def group_members(keycloak: str, realm: str, token: str, group: str, context: ssl.SSLContext | None) -> list[str] | None:
    """The enabled direct members' usernames of the top-level group `group`, None when the realm has no such group."""
    admin = f"{keycloak.rstrip('/')}/admin/realms/{urllib.parse.quote(realm)}"
    try:
        found = _call(f"{admin}/group-by-path/{urllib.parse.quote(group)}", context, token=token)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    members: list[str] = []
    first = 0
    while True:
        query = urllib.parse.urlencode({"first": first, "max": PAGE, "briefRepresentation": "true"})
        page = _call(f"{admin}/groups/{urllib.parse.quote(found['id'])}/members?{query}", context, token=token)
        members += [user["username"] for user in page if user.get("enabled", True)]
        if len(page) < PAGE:
            return members
        first += PAGE


def group_file(members: dict[str, list[str] | None]) -> str:
    """The file group provider's file: `group:user,user` per group with members, sorted."""
    return "".join(f"{group}:{','.join(sorted(set(users)))}\n" for group, users in sorted(members.items()) if users)


def sync(keycloak: str, realm: str, client_id: str, client_secret: str, groups: list[str], kube_api: str, kube_token: str,
         namespace: str, secret: str, keycloak_context: ssl.SSLContext | None, kube_context: ssl.SSLContext | None) -> bool:
    """Write the group file of `groups` into the Secret; True when it changed."""
    token = keycloak_token(keycloak, realm, client_id, client_secret, keycloak_context)
    members = {group: group_members(keycloak, realm, token, group, keycloak_context) for group in groups}
    for group, users in sorted(members.items()):
        if users is None:
            print(f"group {group!r} is not in realm {realm!r}: no line for it", file=sys.stderr)
    content = group_file(members)
    url = f"{kube_api.rstrip('/')}/api/v1/namespaces/{namespace}/secrets/{secret}"
    current = (_call(url, kube_context, token=kube_token) or {}).get("data") or {}
    encoded = base64.b64encode(content.encode()).decode()
    if current.get(GROUP_FILE_KEY) == encoded:
        print(f"{namespace}/{secret} is up to date ({len(content.splitlines())} groups with members)")
        return False
    patch = json.dumps({"data": {GROUP_FILE_KEY: encoded}}).encode()
    _call(url, kube_context, "PATCH", token=kube_token, body=patch, content_type="application/merge-patch+json")
    print(f"{namespace}/{secret} updated ({len(content.splitlines())} groups with members)")
    return True


def main() -> None:
    env = os.environ
    account = "/var/run/secrets/kubernetes.io/serviceaccount"
    with open(f"{account}/token") as handle:
        kube_token = handle.read().strip()
    # The realm is published with the site's CA when the site has one (SITE_CA_FILE names it), else a public one.
    keycloak_context = ssl.create_default_context(cafile=env.get("SITE_CA_FILE") or None)
    kube_context = ssl.create_default_context(cafile=f"{account}/ca.crt")
    kube_api = f"https://{env['KUBERNETES_SERVICE_HOST']}:{env['KUBERNETES_SERVICE_PORT']}"
    groups = [group for group in env["GROUPS"].split(",") if group]
    sync(env["KEYCLOAK_URL"], env["REALM"], env["CLIENT_ID"], env["CLIENT_SECRET"], groups, kube_api, kube_token,
         env["NAMESPACE"], env["SECRET"], keycloak_context, kube_context)


if __name__ == "__main__":
    main()
