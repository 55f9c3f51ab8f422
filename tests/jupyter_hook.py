"""The hub's teams hook (components/engines/jupyterhub.py `teams_hook`) run as the hub runs it, on a stand-in pod."""

from __future__ import annotations

import sys
import types

SERVER_LABELS = {"component": "singleuser-server"}
"""What KubeSpawner labels every user server with before the hook runs."""


def run_teams_hook(monkeypatch, hook: str, groups: list[str], labels: dict[str, str] | None = None) -> types.SimpleNamespace:
    """The pod a server of a user in `groups` gets from the hub's `hook` (its text, as the hub's config runs it), starting
    from KubeSpawner's `labels`. The hook runs in the hub with KubeSpawner's kubernetes_asyncio models; plain records
    stand in for them here."""
    models = types.ModuleType("kubernetes_asyncio.client.models")
    for name in ("V1EnvVar", "V1SecretVolumeSource", "V1Volume", "V1VolumeMount"):
        setattr(models, name, lambda **fields: fields)
    monkeypatch.setitem(sys.modules, "kubernetes_asyncio.client.models", models)
    config = types.SimpleNamespace(KubeSpawner=types.SimpleNamespace())
    exec(hook, {"c": config})  # noqa: S102 - the hub runs this very text as its config
    pod = types.SimpleNamespace(metadata=types.SimpleNamespace(labels=dict(labels or SERVER_LABELS)),
                                spec=types.SimpleNamespace(volumes=None, containers=[types.SimpleNamespace(volume_mounts=None, env=None)]))
    user = types.SimpleNamespace(groups=[types.SimpleNamespace(name=group) for group in groups])
    return config.KubeSpawner.modify_pod_hook(types.SimpleNamespace(user=user), pod)
