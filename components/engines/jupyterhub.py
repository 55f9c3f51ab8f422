"""JupyterHub: CPU notebooks for engineers' ad-hoc exploration (DESIGN section 1); GPU notebooks run elsewhere; heavy queries go to Spark Connect (SPARK_REMOTE is set in every server while it runs).

One profile per configured size; sign-in through Keycloak, open to the platform's users group. JupyterHub is
interactive: the hub, its proxy and every single-user server run in the interactive pool at its PriorityClass.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi_kubernetes as k8s

from components import versions
from components.config import names
from components.constants import (
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    RAY_TOKEN_KEY,
    SITE_CA_DIR,
    SITE_CA_FILE,
    SITE_CA_SECRET,
    TEAM_LABEL,
)
from components.engines import _spark_connect as spark_connect
from components.engines._base import INTERACTIVE, Engine, EngineScope, Quota, Ui
from components.identity import PLATFORM_USERS
from components.network import fence_policy
from components.providers import NamespaceRef


def _profiles(jupyter) -> list[dict]:
    return [
        {
            "display_name": name,
            "description": spec.description,
            "default": i == 0,
            "kubespawner_override": {
                "cpu_guarantee": spec.cpu, "cpu_limit": spec.cpu,
                "mem_guarantee": f"{spec.memory_gib}G", "mem_limit": f"{spec.memory_gib}G",
            },
        }
        for i, (name, spec) in enumerate(jupyter.profiles.items())
    ]


def keycloak_authenticator(issuer: str, callback_url: str, allowed_groups: list[str], site_ca: bool = False) -> dict[str, object]:
    """GenericOAuthenticator's settings for the site's Keycloak realm at `issuer`: sign-in by OIDC, the user's Keycloak
    groups kept as JupyterHub groups, and only members of `allowed_groups` let in. With the site's own CA (`site_ca`,
    mounted by `site_ca_mount`), its calls to the realm (token, userinfo) verify Keycloak against it: OAuthenticator
    17.4 (the hub image of chart 4.4.0) passes `http_request_kwargs` to every tornado HTTPRequest, `ca_certs` among them."""
    return {
        **({"http_request_kwargs": {"ca_certs": SITE_CA_FILE}} if site_ca else {}),
        "oauth_callback_url": callback_url,
        "authorize_url": f"{issuer}/protocol/openid-connect/auth",
        "token_url": f"{issuer}/protocol/openid-connect/token",
        "userdata_url": f"{issuer}/protocol/openid-connect/userinfo",
        "scope": ["openid", "profile", "email"],
        "username_claim": "preferred_username",
        "login_service": "Keycloak",
        "manage_groups": True,
        "auth_state_groups_key": "oauth_user.groups",
        "allowed_groups": allowed_groups,
    }


def site_ca_mount(hub: dict[str, Any]) -> None:
    """Mount the site CA's Secret (`fab-site-ca`, in the hub's namespace) into the hub at `SITE_CA_DIR`."""
    hub["extraVolumes"] = [*hub.get("extraVolumes", []), {"name": "site-ca", "secret": {"secretName": SITE_CA_SECRET}}]
    hub["extraVolumeMounts"] = [*hub.get("extraVolumeMounts", []), {"name": "site-ca", "mountPath": SITE_CA_DIR, "readOnly": True}]


def _spark_remote(compute) -> dict[str, str]:
    """SPARK_REMOTE, which PySpark connects to by itself, while compute runs Spark Connect."""
    return {spark_connect.REMOTE_ENV: spark_connect.URL} if compute.spark.enabled and compute.spark.connect else {}


RAY_TOKEN_MOUNT = "/etc/ray"
"""Where a server finds the Ray tokens of its user's teams: `/etc/ray/<team>/<RAY_TOKEN_KEY>` (auth_token)."""

_RAY_TOKENS_HOOK = """
import json
from kubernetes_asyncio.client.models import V1SecretVolumeSource, V1Volume, V1VolumeMount

_RAY_TOKENS = json.loads(%r)


def _mount_ray_tokens(spawner, pod):
    # A server holds the Ray token of each team its user is a member of (Keycloak group), and no other.
    groups = {group.name for group in spawner.user.groups}
    container = pod.spec.containers[0]
    for group, (team, secret) in sorted(_RAY_TOKENS.items()):
        if group in groups:
            pod.spec.volumes = [*(pod.spec.volumes or []), V1Volume(name=secret, secret=V1SecretVolumeSource(secret_name=secret, default_mode=0o440))]
            container.volume_mounts = [*(container.volume_mounts or []),
                                       V1VolumeMount(name=secret, mount_path=%r + "/" + team, read_only=True)]
    return pod


c.KubeSpawner.modify_pod_hook = _mount_ray_tokens
"""


def ray_tokens_hook(teams: list[str]) -> str:
    """The hub's extra config that mounts a team's Ray token Secret into the servers of the team's members only."""
    tokens = {names.TEAM_GROUP(team): [team, names.RAY_TOKEN_SECRET(team)] for team in sorted(teams)}
    return _RAY_TOKENS_HOOK % (json.dumps(tokens, sort_keys=True), RAY_TOKEN_MOUNT)


SERVER_FENCE = "notebook-servers"
SERVER_LABELS = {"component": "singleuser-server"}
"""What the chart labels every user server with (KubeSpawner's `component`, set by the hub, never by a user)."""


def server_fence() -> dict[str, object]:
    """The user servers of every team share this namespace, and the site's default deny admits every pod of compute (the
    chart's NetworkPolicies add allows to that and so narrow nothing): only the hub and its proxy reach a server, as the
    chart intends; another user's or another team's pod does not, on any port."""
    return fence_policy(SERVER_FENCE, ENGINE.namespace, "JupyterHub's user servers: only the hub and its proxy reach them.",
                        SERVER_LABELS, {ENGINE.namespace: {"component": ["hub", "proxy"]}})


def _deploy(scope: EngineScope) -> None:
    ns_resource = scope.namespace(ENGINE)
    oidc = scope.oidc_secret(ENGINE, ns_resource)
    ca = scope.storage.site_ca(NamespaceRef(scope.cluster, ENGINE.namespace, ns_resource))
    issuer = scope.identity.issuer
    secret = f"{ENGINE.name}-oidc"
    pool = ENGINE.pool
    # The hub and proxy take nodeSelector and tolerations (added to the chart's core-pod ones) and their PriorityClass
    # through extraPodSpec; single-user servers through KubeSpawner's own settings.
    core = {"nodeSelector": pool.node_selector, "tolerations": pool.tolerations,
            "extraPodSpec": {"priorityClassName": pool.priority_class}}
    values = {
        "hub": {
            "config": {
                "JupyterHub": {"authenticator_class": "generic-oauth"},
                "GenericOAuthenticator": keycloak_authenticator(issuer, ENGINE.ui.redirect_uri(scope.domain), [PLATFORM_USERS],
                                                                site_ca=ca.secret is not None),
                "KubeSpawner": {"priority_class_name": pool.priority_class},
            },
            **core,
            # OAuthenticator reads the client id and secret from these variables when config leaves them out.
            "extraEnv": {
                "OAUTH_CLIENT_ID": {"valueFrom": {"secretKeyRef": {"name": secret, "key": OIDC_CLIENT_ID}}},
                "OAUTH_CLIENT_SECRET": {"valueFrom": {"secretKeyRef": {"name": secret, "key": OIDC_CLIENT_SECRET}}},
            },
        },
        "proxy": {"service": {"type": "ClusterIP"}, "chp": core},
        # No placeholder pods (they only hold room for autoscaling) and no user scheduler: every pod here is placed by pool.
        "scheduling": {"userScheduler": {"enabled": False}, "userPlaceholder": {"enabled": False}},
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
        "singleuser": {
            "profileList": _profiles(ENGINE.config(scope.compute)),
            "networkPolicy": {"egressAllowRules": {"privateIPs": True}},
            # No SPARK_CONF_DIR: notebooks reach the catalog through Spark Connect (SPARK_REMOTE), whose server reads the
            # catalog settings and holds Spark's credentials; a server's own Spark has neither (no Polaris principal here).
            **({"extraEnv": _spark_remote(scope.compute)} if _spark_remote(scope.compute) else {}),
            "nodeSelector": pool.node_selector,
            "extraTolerations": pool.tolerations,
        },
    }
    if ca.secret is not None:
        site_ca_mount(values["hub"])
    tokens = []
    if scope.ray_tokens:
        # Each team's Ray token (components/ray.py), which the hook mounts into its members' servers.
        values["hub"]["extraConfig"] = {"fab-ray-tokens": ray_tokens_hook(list(scope.ray_tokens))}
        tokens = [
            k8s.core.v1.Secret(
                f"{scope.prefix}-{names.RAY_TOKEN_SECRET(team)}",
                metadata={"name": names.RAY_TOKEN_SECRET(team), "namespace": ENGINE.namespace, "labels": {TEAM_LABEL: team}},
                # the namespace must exist before anything is created in it
                type="Opaque", string_data={RAY_TOKEN_KEY: token}, opts=scope.after(ns_resource),
            )
            for team, token in sorted(scope.ray_tokens.items())
        ]
    # the hub reads its OIDC client when it starts, and mounts each team's Ray token into its members' servers
    scope.release("jupyterhub", versions.JUPYTERHUB, ENGINE.namespace, values, [oidc, *tokens, *ca.resources()])
    scope.route(ENGINE, ns_resource)
    fence = server_fence()
    k8s.apiextensions.CustomResource(
        f"{scope.prefix}-jupyterhub-server-fence", api_version=fence["apiVersion"], kind=fence["kind"],
        metadata=fence["metadata"], spec=fence["spec"],
        # the namespace, and Cilium's release, which registers the CiliumNetworkPolicy CRD
        opts=scope.after(ns_resource, *([scope.cilium] if scope.cilium else [])),
    )


ENGINE = Engine(
    name="jupyterhub",
    description="JupyterHub",
    pool=INTERACTIVE,
    quota=Quota(cpu="128", memory="1Ti"),
    ui=Ui(host="jupyter", service="proxy-public", port=80, callback="/hub/oauth_callback"),
    deploy=_deploy,
)
