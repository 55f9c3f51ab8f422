"""The policy pack's engine tables, as the engines declare them (components/engines): where each engine chart's and
custom resource's pods get their node selector, tolerations and PriorityClass, and the pool they must be in.

The pack derives these from the program it guards, so a change to an engine's declared placement changes what
fab-compute-pool-placement checks: this test makes that change visible in review. Each line is
`group: node selector paths | toleration paths | priority class paths`, in the order the chart reads them (the paths
are the charts' and CRDs' own keys, checked against the pinned charts when they were written)."""

from __future__ import annotations

from rules.compute import CHARTS as PACK_CHARTS
from rules.compute import KINDS as PACK_KINDS
from rules.compute import PLATFORM_CHARTS

CHARTS = {
    ('airflow', 'batch'): [
        'task: workers.kubernetes.nodeSelector,workers.nodeSelector,nodeSelector | workers.kubernetes.tolerations,workers.tolerations,tolerations | workers.kubernetes.priorityClassName,workers.priorityClassName',
    ],
    ('argo-cd', 'interactive'): [
        'controller: controller.nodeSelector,global.nodeSelector | controller.tolerations,global.tolerations | controller.priorityClassName,global.priorityClassName',
        'server: server.nodeSelector,global.nodeSelector | server.tolerations,global.tolerations | server.priorityClassName,global.priorityClassName',
        'repoServer: repoServer.nodeSelector,global.nodeSelector | repoServer.tolerations,global.tolerations | repoServer.priorityClassName,global.priorityClassName',
        'applicationSet: applicationSet.nodeSelector,global.nodeSelector | applicationSet.tolerations,global.tolerations | applicationSet.priorityClassName,global.priorityClassName',
        'notifications: notifications.nodeSelector,global.nodeSelector | notifications.tolerations,global.tolerations | notifications.priorityClassName,global.priorityClassName',
        'redis: redis.nodeSelector,global.nodeSelector | redis.tolerations,global.tolerations | redis.priorityClassName,global.priorityClassName',
    ],
    ('jupyterhub', 'interactive'): [
        'hub: hub.nodeSelector | hub.tolerations | hub.extraPodSpec.priorityClassName',
        'proxy: proxy.chp.nodeSelector | proxy.chp.tolerations | proxy.chp.extraPodSpec.priorityClassName',
        'single-user: singleuser.nodeSelector | singleuser.extraTolerations | hub.config.KubeSpawner.priority_class_name',
    ],
    ('operator', 'interactive'): [
    ],
    ('spark-operator', 'batch'): [
    ],
    ('superset', 'interactive'): [
        'web: nodeSelector | tolerations | priorityClassName',
        'init: nodeSelector | tolerations | init.priorityClassName',
    ],
    ('trino', 'interactive'): [
        'coordinator: coordinator.nodeSelector | coordinator.tolerations | coordinator.priorityClassName',
        'worker: worker.nodeSelector | worker.tolerations | worker.priorityClassName',
    ],
    ('yunikorn', 'batch'): [
    ],
}
KINDS = {
    ('ScheduledSparkApplication', 'batch'): [
        'driver: spec.template.driver.nodeSelector,spec.template.nodeSelector | spec.template.driver.tolerations | spec.template.driver.priorityClassName',
        'executor: spec.template.executor.nodeSelector,spec.template.nodeSelector | spec.template.executor.tolerations | spec.template.executor.priorityClassName',
    ],
    ('SparkApplication', 'batch'): [
        'driver: spec.driver.nodeSelector,spec.nodeSelector | spec.driver.tolerations | spec.driver.priorityClassName',
        'executor: spec.executor.nodeSelector,spec.nodeSelector | spec.executor.tolerations | spec.executor.priorityClassName',
    ],
    ('StarRocksCluster', 'interactive'): [
        'FE: spec.starRocksFeSpec.nodeSelector | spec.starRocksFeSpec.tolerations |  | only with spec.starRocksFeSpec',
        'BE: spec.starRocksBeSpec.nodeSelector | spec.starRocksBeSpec.tolerations |  | only with spec.starRocksBeSpec',
        'CN: spec.starRocksCnSpec.nodeSelector | spec.starRocksCnSpec.tolerations |  | only with spec.starRocksCnSpec',
    ],
}


def _table(table):
    return {
        (name, pool): [f"{p.group}: {','.join(p.node_selector)} | {','.join(p.tolerations)} | {','.join(p.priority)}"
                       + (f" | only with {p.only_with}" if p.only_with else "") for p in pods]
        for name, (pool, pods) in table.items()
    }


def test_the_pack_places_each_engine_charts_pods_where_the_chart_reads_them():
    assert _table(PACK_CHARTS) == CHARTS


def test_the_pack_places_each_engine_custom_resources_pods_where_the_crd_reads_them():
    assert _table(PACK_KINDS) == KINDS


def test_no_chart_is_both_an_engines_and_the_platforms():
    assert sorted(set(PACK_CHARTS) & set(PLATFORM_CHARTS)) == []
