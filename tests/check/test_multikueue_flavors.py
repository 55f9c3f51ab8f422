"""fabctl check, scheduling, on a MultiKueue manager: its flavors only account quota (the workers' flavors place the
pods), so they are not asked to select a GPU node of the manager, which has none."""

from __future__ import annotations

from check_helpers import deploy_of
from small_site import small_site


def test_the_managers_topology_aware_flavors_need_no_gpu_node(chart_dir, helm):
    deploy = deploy_of(small_site(multikueue=True), chart_dir, helm)
    assert [o["spec"]["nodeLabels"] for o in deploy.plan.objects("ResourceFlavor", "site-t-compute")] == [
        {"fab.internal/gpu-pool": "training", "fab.internal/gpu-type": "h100"}
    ]
    assert deploy.lines("scheduling.fit") == []
