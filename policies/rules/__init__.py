"""The fab-platform rules, one Policy each, in the order of the README's rule table."""

from rules.catalog import catalog_uri_polaris, no_hive_metastore, object_store_tables_denied, single_catalog_authority
from rules.compute import (
    compute_batch_below_interactive,
    compute_pool_placement,
    compute_priority_class,
    starrocks_cn_cache,
    starrocks_shared_data,
)
from rules.credentials import (
    engine_reads_own_credentials,
    submitter_no_secrets,
    submitter_no_wildcards,
    team_namespace_own_credentials,
    team_policy_own_prefixes,
)
from rules.federation import remote_training_replica_only
from rules.gateway import (
    gateway_default_deny,
    gateway_jwt_audience,
    gateway_jwt_issuer,
    gateway_jwt_jwks,
    gateway_rate_limit_backend,
    gateway_rate_limits_global,
    gateway_team_rate_limits,
)
from rules.gpu import gpu_lb_private_only, no_gpu_outside_gpu_clusters, training_kueue_managed
from rules.gpu_routes import no_gpu_helm_values, no_gpu_spark_applications, no_gpu_spark_conf
from rules.infiniband import (
    ipoib_not_in_training_namespaces,
    ipoib_partition_key,
    ipoib_weights_route,
    training_ib_nccl_only,
    training_nccl_service_level,
)
from rules.kueue import (
    multikueue_not_own_worker,
    multikueue_quota_sum,
    multikueue_supported_frameworks,
    serving_no_queue_label,
    serving_not_kueue_managed,
    training_flavor_topology,
    training_preemptible,
)
from rules.network import (
    credentials_have_flow,
    cross_cluster_default_deny,
    flow_direction,
    gateway_local_traffic,
    routes_authenticated,
)
from rules.priorities import priority_class_exists, serving_not_preemptible, training_below_serving
from rules.storage import bucket_least_privilege, replication_gold_only, residency, stateful_protected, versioned_artifacts
from rules.workloads import (
    host_network_allow_listed,
    no_plaintext_secrets,
    pinned_versions,
    pod_security,
    privileged_allow_listed,
    privileged_namespace_allow_listed,
)

PACK_NAME = "fab-platform"
"""The pack's name, as the Pulumi CLI and the Pulumi Cloud show it."""

POLICIES = [
    no_gpu_outside_gpu_clusters,
    no_gpu_spark_applications,
    no_gpu_helm_values,
    no_gpu_spark_conf,
    gpu_lb_private_only,
    gateway_local_traffic,
    routes_authenticated,
    gateway_jwt_issuer,
    gateway_jwt_jwks,
    gateway_jwt_audience,
    gateway_default_deny,
    gateway_team_rate_limits,
    gateway_rate_limits_global,
    gateway_rate_limit_backend,
    cross_cluster_default_deny,
    flow_direction,
    credentials_have_flow,
    host_network_allow_listed,
    privileged_allow_listed,
    privileged_namespace_allow_listed,
    single_catalog_authority,
    catalog_uri_polaris,
    no_hive_metastore,
    object_store_tables_denied,
    bucket_least_privilege,
    stateful_protected,
    versioned_artifacts,
    residency,
    replication_gold_only,
    remote_training_replica_only,
    multikueue_not_own_worker,
    multikueue_quota_sum,
    multikueue_supported_frameworks,
    training_flavor_topology,
    priority_class_exists,
    serving_not_preemptible,
    training_below_serving,
    training_preemptible,
    serving_not_kueue_managed,
    serving_no_queue_label,
    training_kueue_managed,
    training_ib_nccl_only,
    ipoib_not_in_training_namespaces,
    ipoib_partition_key,
    ipoib_weights_route,
    training_nccl_service_level,
    pinned_versions,
    pod_security,
    no_plaintext_secrets,
    compute_pool_placement,
    compute_priority_class,
    compute_batch_below_interactive,
    starrocks_shared_data,
    starrocks_cn_cache,
    engine_reads_own_credentials,
    submitter_no_secrets,
    submitter_no_wildcards,
    team_namespace_own_credentials,
    team_policy_own_prefixes,
]
