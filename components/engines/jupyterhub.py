"""JupyterHub: CPU notebooks for engineers' ad-hoc exploration (DESIGN section 1); GPU notebooks run elsewhere; heavy queries go to the user's team's Spark Connect (SPARK_REMOTE is set in a team member's server while it runs).

One profile per configured size; sign-in through Keycloak, open to the platform's users group. JupyterHub is
interactive: the hub, its proxy and every single-user server run in the interactive pool at its PriorityClass.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi_kubernetes as k8s

from components import versions
from components.airgap import mirror_repository
from components.config import JupyterConfig, names
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
from components.engines._base import INTERACTIVE, Engine, EngineChart, EngineScope, Quota, Ui
from components.identity import PLATFORM_USERS
from components.network_policies import fence_policy
from components.placement import Pods
from components.providers import NamespaceRef
from components.registry import Registry


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


def _spark_connect_on(compute) -> bool:
    """Whether each team runs a Spark Connect server its members' notebooks connect to."""
    return bool(compute.spark.enabled and compute.spark.connect)


TEAMS_HOOK_KEY = "fab-teams"
"""The hub's extraConfig entry holding `teams_hook`."""
RAY_TOKEN_MOUNT = "/etc/ray"
"""Where a server finds the Ray tokens of its user's teams: `/etc/ray/<team>/<RAY_TOKEN_KEY>` (auth_token)."""

_TEAMS_HOOK = """
import json
from kubernetes_asyncio.client.models import V1EnvVar, V1SecretVolumeSource, V1Volume, V1VolumeMount

_TEAMS = json.loads(%r)


def _team_servers(spawner, pod):
    # A server is marked a member of each team its user is in (Keycloak groups, kept by the authenticator's
    # manage_groups), and of no other: the mark is what the team's Spark Connect server and Ray heads admit. It holds
    # the Ray token of those teams only, and SPARK_REMOTE names the Spark Connect server of the first of them.
    groups = {group.name for group in spawner.user.groups}
    container = pod.spec.containers[0]
    mine = [team for group, team in sorted(_TEAMS.items()) if group in groups]
    for team in mine:
        pod.metadata.labels = {**(pod.metadata.labels or {}), team["label"]: %r}
        if team["ray_token"]:
            secret = team["ray_token"]
            pod.spec.volumes = [*(pod.spec.volumes or []), V1Volume(name=secret, secret=V1SecretVolumeSource(secret_name=secret, default_mode=0o440))]
            container.volume_mounts = [*(container.volume_mounts or []),
                                       V1VolumeMount(name=secret, mount_path=%r + "/" + team["team"], read_only=True)]
    remotes = [team["spark_remote"] for team in mine if team["spark_remote"]]
    if remotes:
        container.env = [*(container.env or []), V1EnvVar(name=%r, value=remotes[0])]
    return pod


c.KubeSpawner.modify_pod_hook = _team_servers
"""


def teams_hook(teams: list[str], ray: bool, connect: bool) -> str:
    """The hub's extra config that marks a server as its user's teams' (`fab.internal/member-of-<team>`, from the user's
    Keycloak groups `team-<team>`), mounts those teams' Ray tokens while Ray is on, and with `connect` sets SPARK_REMOTE
    to the first of their Spark Connect servers (engines/_spark_connect.py)."""
    entries = {
        names.TEAM_GROUP(team): {
            "team": team,
            "label": names.team_member_label(team),
            "ray_token": names.RAY_TOKEN_SECRET(team) if ray else None,
            "spark_remote": spark_connect.url(team) if connect else None,
        }
        for team in sorted(teams)
    }
    return _TEAMS_HOOK % (json.dumps(entries, sort_keys=True), names.TEAM_MEMBER, RAY_TOKEN_MOUNT, spark_connect.REMOTE_ENV)


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
            # No SPARK_CONF_DIR: notebooks reach the catalog through their team's Spark Connect (SPARK_REMOTE, set by the
            # teams hook), whose server reads the catalog settings and holds the team's credentials; a server's own Spark
            # has neither (no Polaris principal here).
            "nodeSelector": pool.node_selector,
            "extraTolerations": pool.tolerations,
        },
    }
    if ca.secret is not None:
        site_ca_mount(values["hub"])
    # Every server is marked with its user's teams (what their Spark Connect servers and Ray heads admit), holds their Ray
    # tokens and names their Spark Connect server.
    values["hub"]["extraConfig"] = {TEAMS_HOOK_KEY: teams_hook(sorted(scope.teams), bool(scope.ray_tokens),
                                                               _spark_connect_on(scope.compute))}
    tokens = []
    if scope.ray_tokens:
        # Each team's Ray token (components/ray.py), which the hook mounts into its members' servers.
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


def _jupyterhub_images(registry: Registry) -> dict[str, Any]:
    """Chart 4.4.0: every image is a `name` and a `tag`: hub, proxy (configurable-http-proxy, and traefik for autohttps),
    secret-sync, network-tools (the servers' metadata-blocking init container), the user-scheduler (kube-scheduler),
    the placeholder and pre-puller pause images, the image awaiter and the default single-user image. `imagePullSecrets`
    reaches every chart pod and, through the hub's KubeSpawner, every single-user server. A single-user image set in
    config is moved where it is set (components/notebooks.py)."""
    def name(source: str) -> dict[str, str]:
        return {"name": mirror_repository(registry, source)}

    return {
        "imagePullSecrets": [registry.pull_secret] if registry.pull_secret else [],
        "hub": {"image": name("quay.io/jupyterhub/k8s-hub")},
        "proxy": {
            "chp": {"image": name("quay.io/jupyterhub/configurable-http-proxy")},
            "traefik": {"image": name("traefik")},
            "secretSync": {"image": name("quay.io/jupyterhub/k8s-secret-sync")},
        },
        "singleuser": {
            "image": name("quay.io/jupyterhub/k8s-singleuser-sample"),
            "networkTools": {"image": name("quay.io/jupyterhub/k8s-network-tools")},
        },
        "scheduling": {
            "userScheduler": {"image": name("registry.k8s.io/kube-scheduler")},
            "userPlaceholder": {"image": name("registry.k8s.io/pause")},
        },
        "prePuller": {
            "hook": {"image": name("quay.io/jupyterhub/k8s-image-awaiter")},
            "pause": {"image": name("registry.k8s.io/pause")},
        },
    }


HUB_CHART = EngineChart(versions.JUPYTERHUB, _jupyterhub_images, (
    Pods("hub", ("hub.nodeSelector",), ("hub.tolerations",), ("hub.extraPodSpec.priorityClassName",)),
    Pods("proxy", ("proxy.chp.nodeSelector",), ("proxy.chp.tolerations",), ("proxy.chp.extraPodSpec.priorityClassName",)),
    Pods("single-user", ("singleuser.nodeSelector",), ("singleuser.extraTolerations",), ("hub.config.KubeSpawner.priority_class_name",)),
))
"""The hub's chart (also the GPU notebooks' hub, components/notebooks.py)."""


ENGINE = Engine(
    name="jupyterhub",
    description="JupyterHub",
    pool=INTERACTIVE,
    quota=Quota(cpu="128", memory="1Ti"),
    ui=Ui(host="jupyter", service="proxy-public", port=80, callback="/hub/oauth_callback"),
    deploy=_deploy,
    section=JupyterConfig,
    charts=(HUB_CHART,),
)
