"""The fab-platform rules, one Policy each, in the order of the README's rule table."""

from rules.federation import remote_training_replica_only
from rules.gpu import no_gpu_outside_gpu_clusters, gpu_lb_private_only, serving_not_preemptible, training_ib_nccl_only, training_kueue_managed
from rules.kueue import multikueue_not_own_worker, multikueue_quota_sum
from rules.network import credentials_have_flow, cross_cluster_default_deny, gateway_local_traffic, routes_authenticated
from rules.storage import bucket_least_privilege, residency, single_catalog_authority, stateful_protected, versioned_artifacts
from rules.workloads import host_network_allow_listed, no_plaintext_secrets, pinned_versions, pod_security

POLICIES = [
    no_gpu_outside_gpu_clusters,
    gpu_lb_private_only,
    gateway_local_traffic,
    routes_authenticated,
    cross_cluster_default_deny,
    credentials_have_flow,
    host_network_allow_listed,
    single_catalog_authority,
    bucket_least_privilege,
    stateful_protected,
    versioned_artifacts,
    residency,
    remote_training_replica_only,
    multikueue_not_own_worker,
    multikueue_quota_sum,
    serving_not_preemptible,
    training_kueue_managed,
    training_ib_nccl_only,
    pinned_versions,
    pod_security,
    no_plaintext_secrets,
]
