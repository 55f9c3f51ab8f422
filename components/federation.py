"""SiteFederation: what a site shares with other sites and reads from them (DESIGN section 2, cross-site).

Peers' contract outputs are read through `pulumi.StackReference`, never copied into config, and only
from the sites listed in `federation.linked`: referencing a stack that does not exist fails a
preview, so each site deploys on its own first. For each consumer site, this site creates a
gold-only Polaris principal (exported, secret, for that consumer alone) and, once linked and when
asked, copies its gold buckets, and nothing else, to the replica bucket the consumer exports. For each
peer site, it keeps a replica bucket with a writer the peer uses and, once linked, gives Trino a
catalog on the peer's Polaris through the principal the peer created for this site, and S3 keys to
each of the peer's teams that train here (`remote_training`): they read the replica and write their
own checkpoint prefix, nothing else of this site, and only with the peer's consent (its
`remote_training_teams`, read from its stack). A linked site whose stack does not export what this
site needs ends the program with the reason, never with empty values written into a Secret.

Models for DR (the design: serving is the easiest DR axis): a site copies the models it serves (each served model's
`source`, `SiteConfig.replicated_models`; the rest of the models bucket is the teams' work and stays) to a consumer that
keeps them (`replicate_models`) with the same machinery, a second CronJob beside the gold one through the same target
Secret, into the prefix `replicas/<site>/` of the consumer's own models bucket, which the consumer's writer for this site
may write (its `standby_models`, read from its stack as the consent) and the consumer's inference reads: a warm standby
that serves this site's models from there. The peers' models a site keeps never travel on (no path under `replicas/`).

Replication is a CronJob running the pinned MinIO client (`mc mirror`): object by object, so Iceberg
metadata keeps the producer's absolute paths. The replica is therefore not a table of this site's
catalog: queries read the peer's gold through the peer's Polaris, and the replica is the disaster
recovery copy and the local bytes remote training reads (docs/federation.md, "The replica is not a
catalog").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_minio as minio

from components import versions
from components.config import PROJECT, AdoptConfig, FederationConfig, Flow, RemoteTeam, SiteConfig, names, replica_bucket
from components.constants import (
    ENGINE_LABEL,
    MC_CA_DIR,
    S3_ACCESS_KEY,
    S3_ENDPOINT,
    S3_REGION,
    S3_SECRET_KEY,
    SiteCa,
    s3_secret,
)
from components.data_access import READ_ACTIONS, REPLICATION, WRITE_ACTIONS, bucket_arn
from components.kube import (
    WORKLOAD_SKIPS,
    Adoption,
    adopted,
    checkov_skips,
    namespace,
    restricted_container,
    restricted_pod_security_context,
)
from components.minio_admin import BucketTags, guard
from components.providers import NamespaceRef, SiteRef
from components.storage import StorageCluster

REPLICATION_NAMESPACE = "fab-replication"
MIRROR_SCHEDULE = "*/15 * * * *"
REPLICATES_LABEL = "fab.internal/replicates"
"""On a copy job: the class it copies out (gold, models)."""
REPLICATES_TO_LABEL = "fab.internal/replicates-to"
"""On a copy job: the consumer it copies to; the policy pack lets models leave only to one the stack's config names."""
REMOTE_TRAINING = "remote-training"
"""The principal kind of a peer's team that trains here: its MinIO user's engine tag, its Secret `s3-remote-training`."""
CONSENT_ANNOTATION = "fab.internal/consented-by"
"""On a remote team's S3 Secret: the peer whose stack lists the team (read at deploy, never typed in config)."""


def remote_principal(team: RemoteTeam) -> str:
    """The MinIO user and policy of a peer's team that trains here: `fab-remote-<peer>-<team>`."""
    return f"fab-{team.namespace}"


def replica_writer_policy(replica: str, models: str | None = None, models_prefix: str | None = None) -> dict[str, Any]:
    """A peer's replica writer: its replica bucket whole; with `standby_models`, also the prefix `models_prefix` of this
    site's models bucket, listed, read and written under it only (as a team's prefix: not even the bucket's location).
    AIStor's table catalog is denied on both, as on every platform policy."""
    replica_objects = bucket_arn(replica, True)
    statements: list[dict[str, Any]] = [
        {"Sid": "ListBuckets", "Effect": "Allow", "Action": ["s3:GetBucketLocation", "s3:ListBucket"], "Resource": [bucket_arn(replica)]},
        {"Sid": "ReadObjects", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": [replica_objects]},
        {"Sid": "ListUploads", "Effect": "Allow", "Action": ["s3:ListBucketMultipartUploads"], "Resource": [bucket_arn(replica)]},
        {"Sid": "WriteObjects", "Effect": "Allow", "Action": list(WRITE_ACTIONS), "Resource": [replica_objects]},
    ]
    buckets = [replica]
    if models is not None and models_prefix is not None:
        buckets.append(models)
        statements += [
            {"Sid": "ListModelsPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(models)],
             "Condition": {"StringLike": {"s3:prefix": [f"{models_prefix}*"]}}},
            {"Sid": "ModelsPrefix", "Effect": "Allow", "Action": [*READ_ACTIONS, *WRITE_ACTIONS],
             "Resource": [f"{bucket_arn(models)}/{models_prefix}*"]},
        ]
    statements.append({"Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"],
                       "Resource": [r for b in sorted(buckets) for r in (f"arn:aws:s3tables:::bucket/{b}", f"arn:aws:s3tables:::bucket/{b}/*")]})
    return {"Version": "2012-10-17", "Statement": statements}


def remote_training_policy(replica: str, checkpoints: str, prefix: str) -> dict[str, Any]:
    """A peer's team: read the peer's replica, write under `prefix/` of the checkpoints bucket; nothing else of this site.
    AIStor's table catalog is denied on both, as on every platform policy."""
    own = f"{prefix}/"
    return {"Version": "2012-10-17", "Statement": [
        # Of the checkpoints bucket only the team's prefix is named (not even its location), as for the site's own teams.
        {"Sid": "LocateReplica", "Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": [bucket_arn(replica)]},
        {"Sid": "ListReplica", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(replica)]},
        {"Sid": "ReadReplica", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": [bucket_arn(replica, True)]},
        {"Sid": "ListOwnPrefix", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn(checkpoints)],
         "Condition": {"StringLike": {"s3:prefix": [f"{own}*"]}}},
        {"Sid": "OwnPrefix", "Effect": "Allow", "Action": [*READ_ACTIONS, *WRITE_ACTIONS],
         "Resource": [f"{bucket_arn(checkpoints)}/{own}*"]},
        {"Sid": "NoTableCatalog", "Effect": "Deny", "Action": ["s3tables:*"],
         "Resource": [r for b in sorted({replica, checkpoints}) for r in (f"arn:aws:s3tables:::bucket/{b}", f"arn:aws:s3tables:::bucket/{b}/*")]},
    ]}


@dataclass(frozen=True)
class _RemoteKeys:
    access_key: pulumi.Output[str]
    secret_key: pulumi.Output[str]
    consent: pulumi.Output[str]
    """The peer's name once its stack is read to list the team; the read fails the program otherwise."""
    usable_after: list[pulumi.Resource]


@dataclass(frozen=True)
class SiteFederationArgs:
    site: SiteRef
    """This site: its name is what peers know it by."""
    config: FederationConfig
    """The `federation` section: consumers, peers, linked sites, the peers' organization."""
    adopt: AdoptConfig
    """Declares the replication namespace, replica buckets and writers that exist already."""
    minio_provider: minio.Provider
    """The provider of this site's object store, which keeps the replicas."""
    storage: StorageCluster
    """This site's data plane: the gold buckets, grants, principals; federation runs on its cluster."""
    remote_teams: dict[str, RemoteTeam]
    """Linked peers' teams that train on this site's GPU clusters, by namespace: each gets its own S3 keys (`remote_grant`)."""
    gold_consumers: frozenset[str] = frozenset()
    """The consumers this site's gold buckets are copied to (`replicate_gold`, on from phase 05 when unset:
    SiteConfig.replicates_gold)."""


class SiteFederation(pulumi.ComponentResource):
    """Stack references to federated sites, gold (and models, where asked) replication out, replicas and catalogs in."""

    exports: pulumi.Output[dict[str, Any]]
    """What peers need of this site, and only that (the stack output `federation`)."""

    def __init__(self, name: str, args: SiteFederationArgs, opts: pulumi.ResourceOptions | None = None):
        site = args.site
        self._storage_key = args.storage.cluster.key
        super().__init__(
            "fab:federation:SiteFederation", name, None,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(providers=[args.storage.cluster.provider, args.minio_provider])),
        )
        self._name, self._site, self._storage = name, site, args.storage
        federation = self._config = args.config
        self._adopt = args.adopt
        self._gold_consumers = args.gold_consumers
        self.references = {
            other: pulumi.StackReference(f"{name}-{other}", stack_name=stack_name(federation.organization, other),
                                         opts=pulumi.ResourceOptions(parent=self))
            for other in sorted(federation.linked)
        }
        peers = sorted(federation.peers)
        writers = [f"fab-replica-{peer}" for peer in peers] + [remote_principal(t) for t in args.remote_teams.values()]
        self._names_free = args.storage.minio_names_guard(
            f"{name}-names-free", users=writers, policies=writers, buckets=[replica_bucket(site.name, p) for p in peers],
            opts=pulumi.ResourceOptions(parent=self),
        ) if peers else None
        self._replica_buckets: dict[str, minio.S3Bucket] = {}
        replica_targets = {peer: self._replica(peer) for peer in peers}
        self._remote = {namespace: self._remote_trainer(team) for namespace, team in sorted(args.remote_teams.items())}
        mirrored = sorted(c for c, spec in federation.consumers.items()
                          if (c in args.gold_consumers or spec.replicate_models) and c in self.references)
        if mirrored:
            ns = namespace(f"{name}-ns-{REPLICATION_NAMESPACE}", REPLICATION_NAMESPACE, pulumi.ResourceOptions(parent=self),
                           labels={ENGINE_LABEL: REPLICATION}, adopt=Adoption(args.adopt, self._storage_key),
                           registry=args.storage.cluster.registry)
            here = NamespaceRef(args.storage.cluster, REPLICATION_NAMESPACE, ns)
            local, ca = args.storage.grant(REPLICATION, here), args.storage.site_ca(here)
            for consumer in mirrored:
                self._mirror(consumer, ns, local, ca)

        principals = {}
        for consumer in sorted(federation.consumers):
            client_id, client_secret = args.storage.federation_principal(consumer)
            principals[consumer] = {"client_id": client_id, "client_secret": client_secret}
        self.exports = pulumi.Output.secret({
            "site": site.name,
            "catalog_uri": args.storage.published_catalog_uri,
            "warehouse": args.storage.warehouse,
            "gold_namespace": "gold",
            "s3_endpoint": args.storage.s3_endpoint_internal,
            "principals": principals,
            "replica_targets": replica_targets,
            # Consent for this site's teams to train on a consumer's GPUs; the consumer checks it before giving them keys.
            "remote_training_teams": {consumer: sorted(spec.remote_training_teams)
                                      for consumer, spec in sorted(federation.consumers.items()) if spec.remote_training_teams},
        })
        self.register_outputs({"exports": self.exports})

    def linked_peers(self) -> list[str]:
        """The peers whose gold this site can read now: those whose stacks are linked."""
        return sorted(p for p in self._config.peers if p in self.references)

    def peer_readers(self, peer: str) -> list[str]:
        """The Keycloak groups that may read a peer's gold in Trino (`federation.peers.<peer>.trino_groups`)."""
        return list(self._config.peers[peer].trino_groups)

    def peer_catalog(self, peer: str) -> dict[str, pulumi.Output[Any]]:
        """What Trino needs to read a linked peer's gold: its catalog URI and warehouse, and the principal it made for us."""
        pick = lambda *path: self._required(peer, path)
        return {
            "uri": pick("catalog_uri"),
            "warehouse": pick("warehouse"),
            "s3_endpoint": pick("s3_endpoint"),
            "client_id": pulumi.Output.secret(pick("principals", self._site.name, "client_id")),
            "client_secret": pulumi.Output.secret(pick("principals", self._site.name, "client_secret")),
        }

    def _required(self, other: str, path: tuple[str, ...]) -> pulumi.Output[Any]:
        """A value of a linked site's `federation` output; its absence ends the program with the reason and the fix."""
        reference = self.references[other]

        def dig(exports: Any) -> Any:
            value = _dig(exports, path)
            if value in (None, "", {}):
                raise pulumi.RunError(
                    f"fab-platform:site.federation.linked: the stack {stack_name(self._config.organization, other)} does not export "
                    f"federation.{'.'.join(path)}, which this site needs; deploy {other} with {self._site.name} in its "
                    f"federation first, or remove {other} from federation.linked until then (docs/federation.md)"
                )
            return value

        return reference.get_output("federation").apply(dig)

    def remote_grant(self, namespace: str, to: NamespaceRef) -> k8s.core.v1.Secret:
        """The Secret `s3-remote-training` in a peer's team's namespace on a GPU cluster: its keys and the internal endpoint,
        annotated with the peer that consented (the value is read from the peer's stack, so without consent no Secret)."""
        keys = self._remote[namespace]
        # The namespace must exist before the Secret is created in it, and the keys must work before a pod is handed them.
        return k8s.core.v1.Secret(
            f"{self._name}-{REMOTE_TRAINING}-{to.cluster.key}-{namespace}",
            metadata={"name": s3_secret(REMOTE_TRAINING), "namespace": namespace, "labels": {"fab.internal/engine": REMOTE_TRAINING},
                      "annotations": {CONSENT_ANNOTATION: keys.consent}},
            type="Opaque",
            string_data={S3_ACCESS_KEY: keys.access_key, S3_SECRET_KEY: keys.secret_key,
                         S3_ENDPOINT: self._storage.s3_endpoint_internal, S3_REGION: self._storage.admin_endpoint.region},
            opts=pulumi.ResourceOptions(parent=self, provider=to.cluster.provider, depends_on=[to.resource, *keys.usable_after]),
        )

    def _guarded(self, kind: str, name: str, **more: Any) -> pulumi.ResourceOptions:
        """A MinIO object of federation: imported when adopted, else created once the names check found its name free."""
        return pulumi.ResourceOptions.merge(
            pulumi.ResourceOptions(parent=self, depends_on=[*guard(self._names_free), *more.pop("depends_on", [])], **more),
            adopted(self._adopt.claims(kind, name), name),
        )

    def _remote_trainer(self, team: RemoteTeam) -> _RemoteKeys:
        """A peer's team's MinIO user: reads the peer's replica, writes its checkpoint prefix; usable once the peer consents."""
        principal, prefix = remote_principal(team), f"{self._name}-remote-{team.namespace}"
        bucket, checkpoints = self._replica_buckets[team.peer], self._storage.bucket_of("checkpoints")
        document = remote_training_policy(replica_bucket(self._site.name, team.peer), checkpoints, team.namespace)
        policy = minio.IamPolicy(f"{prefix}-policy", name=principal, policy=json.dumps(document, sort_keys=True),
                                 opts=self._guarded("minio_policy", principal, depends_on=[bucket]))
        user = minio.IamUser(f"{prefix}-user", name=principal,
                             # Its team here is its namespace, which names its prefix; the peer's team name is kept beside it.
                             tags={"fab.internal/engine": REMOTE_TRAINING, "fab.internal/site": team.peer,
                                   "fab.internal/team": team.namespace, "fab.internal/peer-team": team.team},
                             opts=self._guarded("minio_user", principal))
        attachment = minio.IamUserPolicyAttachment(f"{prefix}-attachment", user_name=user.name, policy_name=policy.name,
                                                   opts=pulumi.ResourceOptions(parent=self))
        keys = minio.IamServiceAccount(f"{prefix}-keys", target_user=user.name,
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment], additional_secret_outputs=["secret_key"]))
        return _RemoteKeys(access_key=keys.access_key, secret_key=pulumi.Output.secret(keys.secret_key), consent=self._consent(team),
                           usable_after=[attachment, bucket, self._storage.bucket_resources[checkpoints]])

    def _consent(self, team: RemoteTeam) -> pulumi.Output[str]:
        """The peer's name, once its stack lists the team for this site; otherwise the program ends with the reason and the fix."""
        site, peer = self._site.name, team.peer

        def check(exports: Any) -> str:
            if team.team not in (_dig(exports, ("remote_training_teams", site)) or []):
                raise pulumi.RunError(
                    f"fab-platform:site.federation.peers.{peer}.remote_training.{team.team}: the stack "
                    f"{stack_name(self._config.organization, peer)} does not list {team.team!r} in "
                    f"federation.consumers.{site}.remote_training_teams, so {peer} has not agreed that the team trains here; "
                    f"add it there and deploy {peer}, or remove the team here (docs/federation.md)"
                )
            return peer

        return self.references[peer].get_output("federation").apply(check)

    def _replica(self, peer: str) -> dict[str, Any]:
        """The bucket this site keeps a peer's gold in, with a writer only the peer uses; exported for the peer."""
        site = self._site
        bucket_name, writer = replica_bucket(site.name, peer), f"fab-replica-{peer}"
        child = pulumi.ResourceOptions(parent=self)
        guarded = self._guarded
        bucket = minio.S3Bucket(
            f"{self._name}-replica-{peer}", bucket=bucket_name, acl="private", force_destroy=False,
            opts=guarded("bucket", bucket_name, protect=True, retain_on_delete=True),
        )
        self._replica_buckets[peer] = bucket
        BucketTags(
            f"{self._name}-replica-{peer}-tags", bucket=bucket_name,
            tags={"fab.internal/class": "gold", "fab.internal/residency": "replica", "fab.internal/site": site.name,
                  "fab.internal/source-site": peer},
            # The tags are set on the bucket (named as a plain string), which must exist.
            endpoint=self._storage.admin_endpoint, opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket]),
        )
        # With standby_models the writer also fills the peer's prefix of this site's models bucket (the peer's consent check
        # reads `models_bucket` and `models_prefix` below); this site's inference reads it there like its own models.
        standby = self._config.peers[peer].standby_models
        models, models_prefix = self._storage.bucket_of("models"), names.MODEL_REPLICA_PREFIX(peer)
        document = replica_writer_policy(bucket_name, models, models_prefix) if standby else replica_writer_policy(bucket_name)
        # MinIO takes a policy naming a bucket that does not exist yet, but the keys exported to the peer wait for this
        # policy (through the attachment): the bucket they write to must exist by then.
        policy = minio.IamPolicy(f"{self._name}-replica-{peer}-policy", name=writer, policy=json.dumps(document, sort_keys=True),
                                 opts=guarded("minio_policy", writer, depends_on=[bucket]))
        user = minio.IamUser(f"{self._name}-replica-{peer}-user", name=writer,
                             tags={"fab.internal/engine": "replica-writer", "fab.internal/site": peer}, opts=guarded("minio_user", writer))
        attachment = minio.IamUserPolicyAttachment(f"{self._name}-replica-{peer}-attachment", user_name=user.name,
                                                   policy_name=policy.name, opts=child)
        # The keys are handed to the peer through the stack output as soon as they exist: they must work by then.
        keys = minio.IamServiceAccount(f"{self._name}-replica-{peer}-keys", target_user=user.name,
                                       opts=pulumi.ResourceOptions(parent=self, depends_on=[attachment], additional_secret_outputs=["secret_key"]))
        target = {"endpoint": self._storage.s3_endpoint_internal, "bucket": bucket_name, "access_key": keys.access_key,
                  "secret_key": pulumi.Output.secret(keys.secret_key)}
        if standby:
            target |= {"models_bucket": models, "models_prefix": models_prefix}
        return target

    def _mirror(self, consumer: str, ns: k8s.core.v1.Namespace, local: k8s.core.v1.Secret, ca: SiteCa) -> None:
        # The peer's endpoint is under its own domain: the CA bundle must hold the peer site's CA as well.
        """Every few minutes, copy each gold bucket into the consumer's replica of this site (and nothing else); with
        `replicate_models`, the served models' paths of the models bucket into the consumer's prefix for this site, by a
        second job of the same kind."""
        spec = self._config.consumers[consumer]
        target = self._models_target(consumer) if spec.replicate_models else self._required(consumer, ("replica_targets", self._site.name))
        data = {
            "REMOTE_ENDPOINT": target.apply(lambda t: t["endpoint"]),
            "REMOTE_BUCKET": target.apply(lambda t: t["bucket"]),
            "REMOTE_ACCESS_KEY": pulumi.Output.secret(target.apply(lambda t: t["access_key"])),
            "REMOTE_SECRET_KEY": pulumi.Output.secret(target.apply(lambda t: t["secret_key"])),
        }
        if spec.replicate_models:
            data |= {"REMOTE_MODELS_BUCKET": target.apply(lambda t: t["models_bucket"]),
                     "REMOTE_MODELS_PREFIX": target.apply(lambda t: t["models_prefix"])}
        remote = k8s.core.v1.Secret(
            f"{self._name}-target-{consumer}",
            metadata={"name": names.REPLICA_TARGET(consumer), "namespace": REPLICATION_NAMESPACE},
            type="Opaque",
            string_data=data,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]),  # the namespace must exist before the Secret in it
        )
        # Every run reads both Secrets' keys (and mounts the site CA), and the first may start as soon as the CronJob exists.
        after = [remote, local, *ca.resources()]
        if consumer in self._gold_consumers:
            copies = [["mirror", "--overwrite", f"local/{bucket}", f"remote/$(REMOTE_BUCKET)/{bucket}"] for bucket in self._storage.buckets_of("gold")]
            self._copy_job(f"{self._name}-mirror-{consumer}", names.GOLD_COPY_JOB(consumer), "gold", consumer, copies, ca, after)
        if spec.replicate_models:
            # The served models' weights, path by path, to the same path under the consumer's prefix for this site: the rest
            # of the bucket (the teams' work, the peers' models under replicas/) stays, and the principal reads nothing else.
            models = self._storage.bucket_of("models")
            copies = [["mirror", "--overwrite", f"local/{models}/{path}", f"remote/$(REMOTE_MODELS_BUCKET)/$(REMOTE_MODELS_PREFIX){path}"]
                      for path in self._storage.replicated_models]
            self._copy_job(f"{self._name}-models-{consumer}", names.MODELS_COPY_JOB(consumer), "models", consumer, copies, ca, after)

    def _models_target(self, consumer: str) -> pulumi.Output[dict[str, Any]]:
        """The consumer's replica target for this site, once it keeps this site's models (its `standby_models`, which it
        exports as `models_bucket` and `models_prefix`); otherwise the program ends with the reason and the fix."""
        site = self._site.name

        def check(exports: Any) -> dict[str, Any]:
            target = _dig(exports, ("replica_targets", site))
            if not isinstance(target, dict) or not target.get("models_bucket") or not target.get("models_prefix"):
                raise pulumi.RunError(
                    f"fab-platform:site.federation.consumers.{consumer}.replicate_models: the stack "
                    f"{stack_name(self._config.organization, consumer)} does not export "
                    f"federation.replica_targets.{site}.models_bucket, so {consumer} has not agreed to keep {site}'s models; "
                    f"set federation.peers.{site}.standby_models there and deploy {consumer}, or set replicate_models: false "
                    "here (docs/federation.md)"
                )
            return target

        return self.references[consumer].get_output("federation").apply(check)

    def _copy_job(self, logical: str, job: str, data_class: str, consumer: str, copies: list[list[str]], ca: SiteCa,
                  after: list[pulumi.Resource]) -> None:
        """A CronJob that aliases this site's store (the replication principal) and the consumer's (the target Secret), then
        makes each `mc` copy in turn, the last as its main container."""
        env = [{"name": "MC_CONFIG_DIR", "value": "/work/.mc"}]
        mounts = [{"name": "work", "mountPath": "/work"}, *ca.mounts(MC_CA_DIR)]
        small = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
        target = names.REPLICA_TARGET(consumer)
        registry = self._storage.cluster.registry

        def mc(name: str, args: list[str], secret: pulumi.Input[str]) -> dict[str, Any]:
            return restricted_container(name, registry.image(versions.WEIGHTS_SYNC_IMAGE), 10001, args=args, env=env,
                                        envFrom=[{"secretRef": {"name": secret}}], resources=small, volumeMounts=mounts)

        init = [
            mc("alias-local", ["alias", "set", "local", f"$({S3_ENDPOINT})", f"$({S3_ACCESS_KEY})", f"$({S3_SECRET_KEY})"], s3_secret(REPLICATION)),
            mc("alias-remote", ["alias", "set", "remote", "$(REMOTE_ENDPOINT)", "$(REMOTE_ACCESS_KEY)", "$(REMOTE_SECRET_KEY)"], target),
            *(mc(f"mirror-{i}", args, target) for i, args in enumerate(copies[:-1])),
        ]
        k8s.batch.v1.CronJob(
            logical,
            metadata={"name": job, "namespace": REPLICATION_NAMESPACE, "annotations": checkov_skips(*WORKLOAD_SKIPS),
                      "labels": {REPLICATES_LABEL: data_class, REPLICATES_TO_LABEL: consumer}},
            spec={
                "schedule": MIRROR_SCHEDULE,
                "concurrencyPolicy": "Forbid",
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 3,
                "jobTemplate": {"spec": {"backoffLimit": 2, "template": {"spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "securityContext": restricted_pod_security_context(),
                    "initContainers": init,
                    "containers": [mc("mirror", copies[-1], target)],
                    "volumes": [{"name": "work", "emptyDir": {"sizeLimit": "64Mi"}}, *ca.volumes()],
                    **registry.pod_fields(),
                }}}},
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),  # the Secrets and CA every run reads (see _mirror)
        )

def stack_name(organization: str | None, other: str) -> str:
    """The fully qualified stack of a federated site: `<organization>/fab-platform/<site>`, this stack's organization by default."""
    return f"{organization or pulumi.get_organization()}/{PROJECT}/{other}"


def _dig(value: Any, path: tuple) -> Any:
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


# The flows it opens ---------------------------------------------------------------------------------------------
# Declared to the config by components/catalog.py; SiteConfig.flow_table adds them.


def federation_flows(site: SiteConfig) -> dict[str, Flow]:
    """What other sites reach here, by their declared ranges: S3 (a consumer's Trino reads gold with vended
    credentials; a peer's copy job writes its replica bucket) and Polaris REST (a consumer's Trino catalog)."""
    federation, store, polaris = site.federation, site.storage.object_store, site.storage.polaris
    storage = site.keys_with_role("storage")
    flows: dict[str, Flow] = {}
    for other in federation.sites():
        ranges = federation.ranges.get(other, [])
        if not ranges:
            continue  # refused by its own rule
        flows[names.FEDERATION_S3_FLOW(other)] = Flow(
            description=f"Federated site {other}: " + " and ".join(
                part for part, on in (("its Trino reads our gold", other in federation.consumers),
                                      ("its copy job writes its replica bucket", other in federation.peers),
                                      ("its models into our models bucket", other in federation.standby_peers())) if on
            ) + " over the internal S3 endpoint.",
            from_cidrs=[str(r) for r in ranges], to=storage, port=store.s3_port, to_namespace=store.namespace, to_labels=store.s3_pod_labels,
        )
        if other in federation.consumers:
            flows[names.FEDERATION_POLARIS_FLOW(other)] = Flow(
                description=f"Federated site {other}: its Trino catalog on our Polaris (a gold-only principal).",
                from_cidrs=[str(r) for r in ranges], to=storage, port=polaris.port, to_namespace=polaris.namespace,
            )
    return flows
