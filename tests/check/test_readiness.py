"""fabctl check, readiness: no wait that cannot end (LoadBalancer addresses, what an awaited pod needs)."""

from __future__ import annotations


def test_the_smallest_site_has_no_endless_wait(small):
    assert small.lines("readiness.load-balancer") + small.lines("readiness.deadlock") == []


def test_fails_when_a_load_balancer_is_awaited_before_its_pool(small):
    small.drop_dependency("network-gpu-clustermesh-apiserver", "network-gpu-pool-internal")
    assert small.lines("readiness.load-balancer") == [
        "error [readiness.load-balancer] site-t-gpu Service kube-system/clustermesh-apiserver-vip "
        "(network-gpu-clustermesh-apiserver): network-gpu-clustermesh-apiserver waits for its address, but the pool "
        "network-gpu-pool-internal is not created before it. Fix: make network-gpu-clustermesh-apiserver depend on the pool "
        "(CrossClusterNetwork.lb_pool), or keep the chart's Service ClusterIP"
    ]


def test_fails_when_a_chart_makes_its_service_a_load_balancer_before_any_pool(small):
    release = small.release("cilium", "site-t-gpu")
    (service,) = [o for o in release.objects if o["kind"] == "Service" and o["metadata"]["name"] == "clustermesh-apiserver"]
    service["spec"]["type"] = "LoadBalancer"
    assert [f.line() for f in small.findings("readiness.load-balancer")] == [
        "error [readiness.load-balancer] site-t-gpu Service kube-system/clustermesh-apiserver (network-gpu-cilium (Helm release "
        "cilium)): no LB-IPAM pool selects its labels {'app.kubernetes.io/name': 'clustermesh-apiserver', "
        "'app.kubernetes.io/part-of': 'cilium', 'k8s-app': 'clustermesh-apiserver'}, so network-gpu-cilium waits forever. "
        "Fix: label the Service for one of the cluster's pools (CrossClusterNetwork.lb_service_labels)"
    ]


def test_fails_when_what_an_awaited_pod_needs_waits_for_it(small):
    small.add_dependency("storage-s3-inference-gpu-inference", "inference-vllm-qwen3-8b")
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    paths = [f"spec.template.spec.initContainers[{i}].env[{j}].valueFrom.secretKeyRef"
             for i, c in enumerate(deployment["spec"]["template"]["spec"]["initContainers"])
             for j, e in enumerate(c.get("env") or []) if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "s3-inference"]
    assert paths
    assert small.lines("readiness.deadlock") == [
        "error [readiness.deadlock] site-t-gpu Deployment inference/vllm-qwen3-8b (inference-vllm-qwen3-8b): "
        "inference-vllm-qwen3-8b waits until it is ready, but it needs Secret inference/s3-inference "
        f"({path}), which storage-s3-inference-gpu-inference creates only after inference-vllm-qwen3-8b. Fix: remove the "
        "dependency of storage-s3-inference-gpu-inference on inference-vllm-qwen3-8b, or skip waiting for it"
        for path in paths
    ]


def test_a_pod_that_is_not_awaited_may_wait_for_what_it_needs(small):
    small.add_dependency("storage-s3-inference-gpu-inference", "inference-vllm-qwen3-8b")
    (deployment,) = [d for d in small.plan.objects("Deployment", "site-t-gpu") if d["metadata"]["name"] == "vllm-qwen3-8b"]
    deployment["metadata"].setdefault("annotations", {})["pulumi.com/skipAwait"] = "true"
    assert small.lines("readiness.deadlock") == []


def test_a_post_install_hook_of_a_waiting_release_is_a_note(small):
    release = small.release("kueue", "site-t-gpu")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "annotations": {"helm.sh/hook": "post-install"}},
           "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "example/migrate:1.0"}], "restartPolicy": "Never",
                                          "nodeSelector": {"kubernetes.io/hostname": "gpu-sys-1"}}}}}
    release.objects.append(job)
    assert small.lines("readiness.deadlock") == [
        "note [readiness.deadlock] site-t-gpu Job kueue-system/migrate (training-gpu-kueue (Helm release kueue)): it is a "
        "post-install hook of a release that waits: it runs only after every object of the release is ready, so no pod of the "
        "release may wait for it. Fix: run it as a plain Job (the chart's useHelmHooks: false or equivalent) if a pod waits for it"
    ]


def _clustermesh_service(small):
    (service,) = [o for o in small.plan.objects("Service", "site-t-gpu") if o["metadata"]["name"] == "clustermesh-apiserver-vip"]
    return service


def test_a_pool_without_a_service_selector_serves_every_service(small):
    (pool,) = small.plan.objects("CiliumLoadBalancerIPPool", "site-t-gpu")
    del pool["spec"]["serviceSelector"]
    _clustermesh_service(small)["metadata"]["labels"] = {}
    assert small.lines("readiness.load-balancer") == []


def test_fails_when_a_service_asks_for_an_address_outside_its_pool(small):
    _clustermesh_service(small)["metadata"]["annotations"]["lbipam.cilium.io/ips"] = "192.0.2.99"
    assert [f.problem for f in small.findings("readiness.load-balancer")] == [
        "no LB-IPAM pool selects its labels {'lb.fab.internal/pool': 'internal'} and addresses 192.0.2.99, so "
        "network-gpu-clustermesh-apiserver waits forever"
    ]
