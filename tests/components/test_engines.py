"""Engines are declared once (components/engines): a new engine is its module and its pin; its config switch comes from
its declaration (components/catalog.py)."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import PROJECT_DIR, copy_project
from small_site import small_site

from components.config.schema.compute import ComputeConfig
from components.engines import ENGINES
from fabctl.render import RenderError, render_config
from fabctl.stackfile import SITE_KEY

FLINK_MODULE = '''"""Apache Flink: streaming features for predictive maintenance (an engine added by a test)."""

from components import versions
from components.airgap import mirror_repository, named_secrets
from components.config import BucketAccess
from components.engines._base import BATCH, Engine, EngineChart, EngineScope, Quota
from components.placement import Pods


def _deploy(scope: EngineScope) -> None:
    ns = scope.namespace(ENGINE)
    grants = scope.grants(ENGINE, ns)
    scope.release("flink-operator", versions.FLINK_OPERATOR, ENGINE.namespace, {"watchNamespaces": [ENGINE.namespace]}, [ns, *grants])


ENGINE = Engine(
    name="flink",
    description="Flink streaming",
    quota=Quota(cpu="64", memory="256Gi"),
    buckets=BucketAccess(read_write=("warehouse",), description="Flink streaming"),
    catalog_role="writer",
    pool=BATCH,
    deploy=_deploy,
    charts=(EngineChart(
        versions.FLINK_OPERATOR,
        lambda registry: {"image": {"repository": mirror_repository(registry, "ghcr.io/apache/flink-kubernetes-operator")},
                          "imagePullSecrets": named_secrets(registry)},
        (Pods("operator", ("operatorPod.nodeSelector",), ("operatorPod.tolerations",), ("operatorPod.priorityClassName",)),),
    ),),
)
'''
"""Flink as an engine declares it: its switch (the default section), its chart's image values and where its operator's
pods are placed."""
FLINK_PIN = '''
FLINK_OPERATOR = HelmChart(
    chart="flink-kubernetes-operator", version="1.13.0",
    repo="https://downloads.apache.org/flink/flink-kubernetes-operator-1.13.0/",
)
'''


def test_every_engine_is_switched_by_its_own_compute_section():
    assert ENGINES
    for name in ENGINES:
        assert "enabled" in ComputeConfig.model_fields[name].annotation.model_fields, name


def test_an_engine_is_its_module_its_pin_and_its_switch(tmp_path):
    project = copy_project(tmp_path)
    (project / "components" / "engines" / "flink.py").write_text(FLINK_MODULE)
    versions = project / "components" / "versions.py"
    versions.write_text(versions.read_text() + FLINK_PIN)

    plan = render_config("site-t", {SITE_KEY: small_site()}, project)

    compute = "site-t-compute"
    (quota,) = [q for q in plan.objects("ResourceQuota", compute) if q["metadata"]["namespace"] == "flink"]
    assert quota["spec"]["hard"] == {"requests.cpu": "64", "requests.memory": "256Gi", "requests.nvidia.com/gpu": "0"}
    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "flink-operator"]
    assert (release["inputs"]["version"], release["inputs"]["namespace"]) == ("1.13.0", "flink")
    delivered = {s["metadata"]["name"] for s in plan.objects("Secret", compute) if s["metadata"]["namespace"] == "flink"}
    assert delivered == {"s3-flink", "polaris-flink"}
    (policy,) = [p for p in plan.of_type("minio:index/iamPolicy:IamPolicy") if p["inputs"]["name"] == "fab-flink"]
    writes = [s for s in json.loads(policy["inputs"]["policy"])["Statement"] if s["Sid"] == "WriteObjects"]
    assert writes[0]["Resource"] == ["arn:aws:s3:::site-t-warehouse/*"]


def test_only_the_hub_and_its_proxy_reach_a_jupyter_user_server(small_plan):
    """Every team's users share the namespace, and the site's default deny admits every pod of compute."""
    from cilium_engine import admitted, in_plan

    server = in_plan(small_plan, "site-t-compute", "jupyterhub", {"component": "singleuser-server", "hub.jupyter.org/username": "ann"})
    verdicts = {who: admitted(small_plan, server, in_plan(small_plan, "site-t-compute", ns, labels), 8888)
                for who, ns, labels in (("hub", "jupyterhub", {"component": "hub"}), ("proxy", "jupyterhub", {"component": "proxy"}),
                                        ("server", "jupyterhub", {"component": "singleuser-server"}),
                                        ("team", "team-yield", {"app": "mine"}))}
    assert {who: (v.admitted, v.why) for who, v in verdicts.items()} == {
        "hub": (True, "allowed by fab-default-deny-remote"), "proxy": (True, "allowed by fab-default-deny-remote"),
        "server": (False, "denied by notebook-servers"), "team": (False, "denied by notebook-servers"),
    }


MIRROR = {"charts": "oci://registry.fab.internal/charts", "images": "registry.fab.internal/mirror",
          "maven": "https://maven.fab.internal/central", "files": "https://files.fab.internal"}


def test_an_engines_chart_gets_its_image_values_and_its_pods_are_placement_checked(tmp_path):
    """Only flink.py and versions.py declare Flink's chart: on a site with a registry its release gets the image values,
    and the policy pack (started as the CLI starts it, in the copy) checks its pods against the batch pool."""
    from fabctl.policy import analyze

    project = copy_project(tmp_path)
    shutil.copytree(PROJECT_DIR / "policies", project / "policies", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "venv").symlink_to((PROJECT_DIR / "venv").resolve())
    (project / "components" / "engines" / "flink.py").write_text(FLINK_MODULE)
    versions = project / "components" / "versions.py"
    versions.write_text(versions.read_text() + FLINK_PIN)

    plan = render_config("site-t", {SITE_KEY: {**small_site(), "registry": MIRROR}}, project)

    (release,) = [r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "flink-operator"]
    assert release["inputs"]["values"]["image"] == {"repository": "registry.fab.internal/mirror/ghcr.io/apache/flink-kubernetes-operator"}
    found = [(v.policy, v.message.splitlines()[-1]) for v in analyze(plan, project / "policies")
             if "flink" in v.message]
    release = "Helm release compute-flink-operator (chart flink-kubernetes-operator) on site-t-compute: its operator pods"
    work = "flink-kubernetes-operator is batch work"
    assert found == [
        ("fab-compute-pool-placement", (f"{release} select fab.internal/compute-pool=None (operatorPod.nodeSelector); {work}, "
         "allowed: nodeSelector fab.internal/compute-pool=batch")),
        ("fab-compute-pool-placement", (f"{release} do not tolerate the batch pool's taint (operatorPod.tolerations: []); {work}, "
         "allowed: a toleration of fab.internal/compute-pool=batch:NoSchedule")),
        ("fab-compute-priority-class", (f"{release} run at no PriorityClass (operatorPod.priorityClassName); {work}, "
         "allowed: compute-batch")),
    ]


def test_fails_when_two_modules_declare_one_engine(tmp_path):
    """An engine's name is its namespace and config section: a second module naming it is refused, never a silent
    overwrite of the first."""
    project = copy_project(tmp_path)
    (project / "components" / "engines" / "trino_copy.py").write_text(
        (project / "components" / "engines" / "trino.py").read_text())

    with pytest.raises(RenderError) as refused:
        render_config("site-t", {SITE_KEY: small_site()}, project)
    assert ("components/engines/trino_copy.py declares the engine 'trino', which another module declares already: an "
            "engine's name is its namespace and config section, one module each") in str(refused.value)
