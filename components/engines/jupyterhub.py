"""JupyterHub: CPU notebooks for engineers' ad-hoc exploration (DESIGN section 1); GPU notebooks run elsewhere; heavy queries go to Spark Connect (SPARK_REMOTE is set in every server while it runs).

One profile per configured size; sign-in through Keycloak, open to the platform's users group. JupyterHub is
interactive: the hub, its proxy and every single-user server run in the interactive pool at its PriorityClass.
"""

from __future__ import annotations

from components import versions
from components.constants import OIDC_CLIENT_ID, OIDC_CLIENT_SECRET
from components.engines import _spark_connect as spark_connect
from components.engines._base import INTERACTIVE, Engine, EngineScope, Quota, Ui
from components.identity import PLATFORM_USERS


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


def _spark_remote(compute) -> dict[str, str]:
    """SPARK_REMOTE, which PySpark connects to by itself, while compute runs Spark Connect."""
    return {spark_connect.REMOTE_ENV: spark_connect.URL} if compute.spark.enabled and compute.spark.connect else {}


def _deploy(scope: EngineScope) -> None:
    ns_resource = scope.namespace(ENGINE)
    oidc = scope.oidc_secret(ENGINE, ns_resource)
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
                "GenericOAuthenticator": {
                    "oauth_callback_url": ENGINE.ui.redirect_uri(scope.domain),
                    "authorize_url": f"{issuer}/protocol/openid-connect/auth",
                    "token_url": f"{issuer}/protocol/openid-connect/token",
                    "userdata_url": f"{issuer}/protocol/openid-connect/userinfo",
                    "scope": ["openid", "profile", "email"],
                    "username_claim": "preferred_username",
                    "login_service": "Keycloak",
                    "manage_groups": True,
                    "auth_state_groups_key": "oauth_user.groups",
                    "allowed_groups": [PLATFORM_USERS],
                },
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
            "extraEnv": {"SPARK_CONF_DIR": "/etc/spark", **_spark_remote(scope.compute)},
            "nodeSelector": pool.node_selector,
            "extraTolerations": pool.tolerations,
        },
    }
    release = scope.release("jupyterhub", versions.JUPYTERHUB, ENGINE.namespace, values, [oidc])
    scope.route(ENGINE, [release])


ENGINE = Engine(
    name="jupyterhub",
    description="JupyterHub",
    pool=INTERACTIVE,
    quota=Quota(cpu="128", memory="1Ti"),
    ui=Ui(host="jupyter", service="proxy-public", port=80, callback="/hub/oauth_callback"),
    deploy=_deploy,
)
