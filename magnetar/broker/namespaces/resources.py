"""Admin resources in the metadata store: clusters, tenants, namespaces and
their policies, partitioned topic metadata.

This module is the one place that knows where they live. Layout (every value
is a JSON object with Pulsar's field names):

====================================================================  ==================================
``/admin/clusters/<cluster>``                                          ``{"serviceUrl", "brokerServiceUrl"}``
``/admin/policies/<tenant>``                                           ``{"adminRoles", "allowedClusters"}``
``/admin/policies/<tenant>/<namespace>``                               namespace policies (:data:`POLICY_FIELDS`)
``/admin/partitioned-topics/<tenant>/<namespace>/persistent/<topic>``  ``{"partitions": n}``
====================================================================  ==================================

A namespace's key lies below its tenant's, so the tenant's namespaces are the
children of the tenant key. Topics themselves are managed ledgers (see
:mod:`magnetar.storage.managed_ledger`); this module knows nothing of them.

:mod:`.policy_keys` reads a namespace's topic-level documents by range and
tells whose policies a changed key concerns. Functions here only read and
write the store. They raise
:class:`ResourceError` subclasses, which the admin API maps to HTTP codes:
:class:`ResourceNotFound` (404), :class:`AlreadyExists` (409), :class:`NotEmpty` (409),
:class:`InvalidInput` (400), :class:`PreconditionFailed` (412). Nothing is
written when one is raised. Updates are read-modify-write with compare-and-set,
retried when another writer got in between, so concurrent changes to
different policies of one namespace are all kept.
"""
from __future__ import annotations

import json
import re
from urllib.parse import quote
from typing import Any, Callable

from magnetar.formats import check_format
from magnetar.metadata import BadVersion, MetadataStore
from magnetar.metadata import KeyNotFound

from magnetar.broker.topic_name import TopicName

CLUSTERS = "/admin/clusters"
POLICIES = "/admin/policies"
PARTITIONED = "/admin/partitioned-topics"
#: Topic-level policies (replication clusters), one document per topic.
TOPIC_POLICIES = "/admin/topic-policies"
#: What lives in the configuration store when regions share one (everything
#: else, ledgers, cursors, owners, is each cluster's own).
#: The format of clusters, tenants and namespace policies (no ``format`` field: 1).
RESOURCE_FORMAT = 1
SHARED_BY_REGIONS = (CLUSTERS, POLICIES, PARTITIONED, TOPIC_POLICIES)

_NAME = re.compile(r"^[-=:.\w]+$")
_CAS_ATTEMPTS = 20

#: The namespace policies Magnetar keeps, with their values when unset.
#: ``None`` means "not set here: the broker's default applies".
POLICY_FIELDS: dict[str, Any] = {
    "replication_clusters": [],
    "retention_policies": None,
    "message_ttl_in_seconds": None,
    "deduplicationEnabled": None,
    "backlog_quota_map": {},
    # Pulsar's permissions: namespace_auth, destination_auth, subscription_auth_roles.
    "auth_policies": {},
    # Producers / consumers a topic of the namespace admits (None: no limit).
    "max_producers_per_topic": None,
    "max_consumers_per_topic": None,
    # Pulsar's PublishRate {publishThrottlingRateInMsg, publishThrottlingRateInByte} (-1: no limit).
    "publish_rate": None,
    # Pulsar's DispatchRate {dispatchThrottlingRateInMsg, dispatchThrottlingRateInByte,
    # ratePeriodInSecond, relativeToPublishRate}: of each topic, of each subscription.
    "dispatch_rate": None,
    "subscription_dispatch_rate": None,
    # Pulsar's SchemaCompatibilityStrategy name; None / UNDEFINED: the broker's.
    "schema_compatibility_strategy": None,
    # Object storage: "latency" or "cost" (storage/object/profiles.py); None: the broker's.
    "storage_profile": None,
    # Set while the namespace is being deleted: no topic may be created in it.
    "deleted": False,
}


class ResourceError(Exception):
    """A request about admin resources is refused; nothing was changed."""


class ResourceNotFound(ResourceError):
    pass


class AlreadyExists(ResourceError):
    pass


class NotEmpty(ResourceError):
    pass


class InvalidInput(ResourceError):
    pass


class PreconditionFailed(ResourceError):
    pass


class Forbidden(ResourceError):
    """Refused by a rule of the tenant, not by the caller's role (Pulsar
    answers these 403 too: a cluster outside the tenant's allowed clusters)."""


def check_name(kind: str, name: str) -> None:
    """Raise InvalidInput unless ``name`` is a valid cluster/tenant/namespace segment."""
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise InvalidInput(f"invalid {kind} name {name!r}: use letters, digits and - _ = : .")


def split_namespace(namespace: str) -> tuple[str, str]:
    """``"tenant/ns"`` -> ``("tenant", "ns")``; InvalidInput if malformed."""
    parts = namespace.strip("/").split("/") if isinstance(namespace, str) else []
    if len(parts) != 2:
        raise InvalidInput(f"invalid namespace {namespace!r}: expected tenant/namespace")
    check_name("tenant", parts[0])
    check_name("namespace", parts[1])
    return parts[0], parts[1]


# -- generic helpers ----------------------------------------------------------
async def _read(store: MetadataStore, key: str) -> tuple[dict, int] | None:
    record = await store.get(key)
    if record is None:
        return None
    return decode_document(key, record.value), record.version


def decode_document(key: str, value: bytes) -> dict:
    """The JSON object stored at ``key`` ({} if it is not one); FormatError for a later format."""
    try:
        doc = json.loads(value)
    except ValueError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    # Clusters, tenants and namespace policies are format 1 and carry no
    # ``format`` field; one a later Magnetar writes is refused, not rewritten.
    check_format("metadata record", key, doc.pop("format", 1), RESOURCE_FORMAT)
    return doc


def _encode(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


async def _create(store: MetadataStore, key: str, doc: dict, what: str) -> None:
    try:
        await store.put(key, _encode(doc), -1)
    except BadVersion:
        raise AlreadyExists(f"{what} already exists") from None


async def _update(store: MetadataStore, key: str, change: Callable[[dict], dict], what: str) -> dict:
    """Apply ``change`` to the document at ``key`` with compare-and-set; return the new document."""
    for _ in range(_CAS_ATTEMPTS):
        current = await _read(store, key)
        if current is None:
            raise ResourceNotFound(f"{what} does not exist")
        doc, version = current
        new = change(dict(doc))
        try:
            await store.put(key, _encode(new), version)
        except (BadVersion, KeyNotFound):
            continue  # someone else wrote it meanwhile: read again
        return new
    raise PreconditionFailed(f"{what} is being changed concurrently; try again")


async def _delete(store: MetadataStore, key: str, what: str) -> None:
    try:
        await store.delete(key)
    except KeyNotFound:
        raise ResourceNotFound(f"{what} does not exist") from None


# -- clusters -------------------------------------------------------------------
async def list_clusters(store: MetadataStore) -> list[str]:
    return await store.children(CLUSTERS)


async def get_cluster(store: MetadataStore, cluster: str) -> dict:
    check_name("cluster", cluster)
    found = await _read(store, f"{CLUSTERS}/{cluster}")
    if found is None:
        raise ResourceNotFound(f"Cluster {cluster} does not exist")
    return found[0]


#: ClusterData fields a cluster record keeps (Pulsar's names; all strings).
CLUSTER_FIELDS = ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls", "proxyServiceUrl")


def _cluster_data(body: Any) -> dict:
    if not isinstance(body, dict):
        raise InvalidInput("cluster data must be a JSON object {serviceUrl, brokerServiceUrl, ...}")
    data = {k: v for k, v in body.items() if k in CLUSTER_FIELDS and v not in (None, "")}
    wrong = [k for k, v in data.items() if not isinstance(v, str)]
    if wrong:
        raise InvalidInput(f"cluster data field {wrong[0]} must be a string URL")
    return data


async def create_cluster(store: MetadataStore, cluster: str, body: Any) -> dict:
    """Record a cluster (another region, or one to come); AlreadyExists (409) if it is known."""
    check_name("cluster", cluster)
    data = _cluster_data(body)
    await _create(store, f"{CLUSTERS}/{cluster}", data, f"Cluster {cluster}")
    return data


async def update_cluster(store: MetadataStore, cluster: str, body: Any) -> dict:
    check_name("cluster", cluster)
    data = _cluster_data(body)
    return await _update(store, f"{CLUSTERS}/{cluster}", lambda _: data, f"Cluster {cluster}")


async def delete_cluster(store: MetadataStore, cluster: str, own: str) -> None:
    """Forget a cluster; PreconditionFailed (412) for the broker's own and for one
    a namespace replicates to (its topics would be stranded)."""
    await get_cluster(store, cluster)
    if cluster == own:
        raise PreconditionFailed(f"Cluster {cluster} is this broker's own cluster: it cannot be deleted")
    for tenant in await list_tenants(store):
        for namespace in await list_namespaces(store, tenant):
            if cluster in ((await namespace_policies(store, namespace)).get("replication_clusters") or []):
                raise PreconditionFailed(f"Cluster {cluster} is not empty: namespace {namespace} replicates to it")
    await _delete(store, f"{CLUSTERS}/{cluster}", f"Cluster {cluster}")


async def ensure_cluster(store: MetadataStore, cluster: str, data: dict) -> None:
    """Create or refresh the cluster record (the broker does this at start)."""
    check_name("cluster", cluster)
    key = f"{CLUSTERS}/{cluster}"
    found = await _read(store, key)
    if found is None or found[0] != data:
        await store.put(key, _encode(data))


def _merge_url(urls: str, url: str, scheme: str) -> str:
    """``url`` added to a multi-host URL (``scheme://h1:p1,h2:p2``), Pulsar's form."""
    hosts = [h for h in urls.removeprefix(scheme).split(",") if h] if urls.startswith(scheme) else []
    host = url.removeprefix(scheme)
    if host not in hosts:
        hosts.append(host)
    return scheme + ",".join(hosts)


async def add_cluster_broker(store: MetadataStore, cluster: str, data: dict) -> None:
    """Add one broker's URLs to the cluster record, creating it if needed.

    Every broker of a cluster calls this at start: the record's
    ``brokerServiceUrl`` / ``serviceUrl`` (and ``brokerServiceUrlTls`` /
    ``serviceUrlTls`` of brokers with TLS listeners) become multi-host URLs naming
    each of them, so another region reaches the cluster through whichever
    broker is up (a stale host only costs a failed connection attempt).
    """
    check_name("cluster", cluster)

    def merge(doc: dict) -> dict:
        out = dict(doc)
        for field, scheme in (("brokerServiceUrl", "pulsar://"), ("serviceUrl", "http://"),
                              ("brokerServiceUrlTls", "pulsar+ssl://"), ("serviceUrlTls", "https://")):
            if field in data:
                out[field] = _merge_url(str(doc.get(field) or ""), data[field], scheme)
        return out

    key = f"{CLUSTERS}/{cluster}"
    for _ in range(_CAS_ATTEMPTS):
        found = await _read(store, key)
        if found is None:
            try:
                await store.put(key, _encode(merge({})), -1)
                return
            except BadVersion:
                continue
        doc, version = found
        merged = merge(doc)
        if merged == doc:
            return
        try:
            await store.put(key, _encode(merged), version)
            return
        except BadVersion:
            continue
    raise PreconditionFailed(f"Cluster {cluster}: too many concurrent updates")


def broker_urls(data: dict, field: str = "brokerServiceUrl") -> list[str]:
    """The single-host URLs of a cluster record's (possibly multi-host) URL."""
    value = str(data.get(field) or "")
    scheme, sep, hosts = value.partition("://")
    if not sep:
        return []
    return [f"{scheme}://{h}" for h in hosts.split(",") if h]


# -- tenants ----------------------------------------------------------------------
async def list_tenants(store: MetadataStore) -> list[str]:
    return await store.children(POLICIES)


async def get_tenant(store: MetadataStore, tenant: str) -> dict:
    check_name("tenant", tenant)
    found = await _read(store, f"{POLICIES}/{tenant}")
    if found is None:
        raise ResourceNotFound(f"Tenant {tenant} does not exist")
    return found[0]


async def _tenant_info(store: MetadataStore, body: Any) -> dict:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InvalidInput("tenant info must be a JSON object {adminRoles, allowedClusters}")
    unknown = set(body) - {"adminRoles", "allowedClusters"}
    if unknown:
        raise InvalidInput(f"unknown tenant info fields: {', '.join(sorted(unknown))}")
    roles = body.get("adminRoles", [])
    clusters = body.get("allowedClusters")
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise InvalidInput("adminRoles must be a list of strings")
    known = await list_clusters(store)
    if clusters is None:
        clusters = known  # like pulsar-admin: every cluster when none is named
    if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
        raise InvalidInput("allowedClusters must be a list of cluster names")
    missing = sorted(set(clusters) - set(known))
    if missing:
        raise PreconditionFailed(f"Clusters do not exist: {', '.join(missing)}")
    return {"adminRoles": sorted(set(roles)), "allowedClusters": sorted(set(clusters))}


async def create_tenant(store: MetadataStore, tenant: str, body: Any = None) -> dict:
    """Create ``tenant``; ``body`` is Pulsar's TenantInfo (optional)."""
    check_name("tenant", tenant)
    info = await _tenant_info(store, body)
    await _create(store, f"{POLICIES}/{tenant}", info, f"Tenant {tenant}")
    return info


async def update_tenant(store: MetadataStore, tenant: str, body: Any) -> dict:
    check_name("tenant", tenant)
    info = await _tenant_info(store, body)
    return await _update(store, f"{POLICIES}/{tenant}", lambda _: info, f"Tenant {tenant}")


async def delete_tenant(store: MetadataStore, tenant: str) -> None:
    """Delete an empty tenant; NotEmpty while it has namespaces."""
    await get_tenant(store, tenant)
    namespaces = await list_namespaces(store, tenant)
    if namespaces:
        raise NotEmpty(f"The tenant {tenant} still has namespaces: {', '.join(namespaces)}")
    await _delete(store, f"{POLICIES}/{tenant}", f"Tenant {tenant}")


# -- namespaces -----------------------------------------------------------------
def _ns_key(namespace: str) -> str:
    tenant, ns = split_namespace(namespace)
    return f"{POLICIES}/{tenant}/{ns}"


async def list_namespaces(store: MetadataStore, tenant: str) -> list[str]:
    """``tenant/ns`` names of the tenant's namespaces; ResourceNotFound if no such tenant."""
    await get_tenant(store, tenant)
    return [f"{tenant}/{ns}" for ns in await store.children(f"{POLICIES}/{tenant}")]


async def namespace_exists(store: MetadataStore, namespace: str) -> bool:
    try:
        return await store.exists(_ns_key(namespace))
    except InvalidInput:
        return False


async def namespace_open_for_topics(store: MetadataStore, namespace: str) -> bool:
    """Whether topics may be created in the namespace: it exists and is not being deleted."""
    try:
        return not (await get_namespace(store, namespace)).get("deleted")
    except (ResourceNotFound, InvalidInput):
        return False


async def get_namespace(store: MetadataStore, namespace: str) -> dict:
    """The namespace's policies (every field of POLICY_FIELDS); ResourceNotFound if missing."""
    found = await _read(store, _ns_key(namespace))
    if found is None:
        raise ResourceNotFound(f"Namespace {namespace} does not exist")
    return {**POLICY_FIELDS, **found[0]}


async def namespace_policies(store: MetadataStore, namespace: str) -> dict:
    """The namespace's policies, for broker features (dedup, retention, TTL).

    Every field of :data:`POLICY_FIELDS` is present; ``None`` means "unset:
    use the broker default". A namespace that does not exist (or a malformed
    name) gives the unset policies rather than an error, so a topic whose
    namespace was deleted under it keeps working on defaults.
    """
    try:
        return await get_namespace(store, namespace)
    except (ResourceNotFound, InvalidInput):
        return dict(POLICY_FIELDS)


async def create_namespace(store: MetadataStore, namespace: str, policies: dict | None = None) -> dict:
    """Create ``namespace`` under an existing tenant with (validated) ``policies``."""
    tenant, _ = split_namespace(namespace)
    info = await get_tenant(store, tenant)
    doc = dict(POLICY_FIELDS)
    doc["replication_clusters"] = list(info.get("allowedClusters", []))[:1]
    doc.update(policies or {})
    await _create(store, _ns_key(namespace), doc, f"Namespace {namespace}")
    return doc


async def set_policy(store: MetadataStore, namespace: str, field: str, value: Any) -> dict:
    """Set one (already validated) policy field; ``None`` unsets it."""
    if field not in POLICY_FIELDS:
        raise InvalidInput(f"unknown policy {field!r}")

    def change(doc: dict) -> dict:
        doc[field] = value if value is not None else POLICY_FIELDS[field]
        return doc

    return await _update(store, _ns_key(namespace), change, f"Namespace {namespace}")


async def update_policy(store: MetadataStore, namespace: str, field: str, change: Callable[[Any], Any]) -> Any:
    """Replace one policy field by ``change(current value)``, with compare-and-set
    (concurrent grants do not overwrite each other); returns the new value."""
    if field not in POLICY_FIELDS:
        raise InvalidInput(f"unknown policy {field!r}")

    def apply(doc: dict) -> dict:
        doc[field] = change(doc.get(field, POLICY_FIELDS[field]))
        return doc

    return (await _update(store, _ns_key(namespace), apply, f"Namespace {namespace}"))[field]


async def delete_namespace(store: MetadataStore, namespace: str) -> None:
    """Delete the namespace's record (the caller removed its topics first)."""
    await _delete(store, _ns_key(namespace), f"Namespace {namespace}")


# -- partitioned topics ---------------------------------------------------------
def _partitioned_key(name: TopicName) -> str:
    return f"{PARTITIONED}/{name.tenant}/{name.namespace}/{name.domain}/{name.local}"


async def get_partitions(store: MetadataStore, name: TopicName) -> int:
    """The partition count of a partitioned topic; 0 if ``name`` is not one."""
    found = await _read(store, _partitioned_key(name))
    if found is None:
        return 0
    count = found[0].get("partitions", 0)
    return count if isinstance(count, int) and count > 0 else 0


async def create_partitioned(store: MetadataStore, name: TopicName, partitions: int) -> None:
    await _create(store, _partitioned_key(name), {"partitions": partitions}, f"Partitioned topic {name}")


async def update_partitions(store: MetadataStore, name: TopicName, partitions: int) -> int:
    """Raise the partition count to ``partitions``; returns the previous count.

    The count only grows: anything else is AlreadyExists (409, as in Pulsar).
    """
    before: list[int] = []

    def change(doc: dict) -> dict:
        current = doc.get("partitions", 0)
        if partitions <= current:
            raise AlreadyExists(f"number of partitions must be more than existing {current}")
        before.append(current)
        return {**doc, "partitions": partitions}

    await _update(store, _partitioned_key(name), change, f"Partitioned topic {name}")
    return before[-1]


async def delete_partitioned(store: MetadataStore, name: TopicName) -> None:
    await _delete(store, _partitioned_key(name), f"Partitioned topic {name}")


async def list_partitioned(store: MetadataStore, namespace: str, domain: str = "persistent") -> list[str]:
    """Fully qualified names of the namespace's partitioned topics."""
    tenant, ns = split_namespace(namespace)
    locals_ = await store.children(f"{PARTITIONED}/{tenant}/{ns}/{domain}")
    return [f"{domain}://{tenant}/{ns}/{local}" for local in locals_]


# -- first start ----------------------------------------------------------------------
async def bootstrap(store: MetadataStore, cluster: str, cluster_data: dict, clustered: bool = False,
                    region: bool = False) -> None:
    """What a standalone broker needs, as Pulsar standalone does: the cluster
    record (refreshed at every start), and tenant ``public`` with namespace
    ``public/default`` when they do not exist.

    A ``region`` (clusters sharing a configuration store) that finds them
    already there joins them, as Pulsar's cluster metadata setup does: it adds
    itself to ``public``'s allowed clusters and to ``public/default``'s
    replication clusters, so every region serves ``public/default`` (a region
    serves only the namespaces replicated to it) and the regions replicate it.

    ``clustered``: one of several brokers of the cluster, whose URLs are
    added to the record (:func:`add_cluster_broker`) rather than replacing
    the others' (a replacement left only the last broker to start in it)."""
    if clustered:
        await add_cluster_broker(store, cluster, cluster_data)
    else:
        await ensure_cluster(store, cluster, cluster_data)
    try:
        await create_tenant(store, "public", {"adminRoles": [], "allowedClusters": [cluster]})
    except AlreadyExists:
        if region:
            await _update(store, f"{POLICIES}/public",
                          lambda info: {**info, "allowedClusters": sorted({*info.get("allowedClusters", []), cluster})},
                          "Tenant public")
    try:
        await create_namespace(store, "public/default", {"replication_clusters": [cluster]})
    except AlreadyExists:
        if region:
            await _update(store, _ns_key("public/default"),
                          lambda doc: {**doc, "replication_clusters":
                                       sorted({*(doc.get("replication_clusters") or []), cluster})},
                          "Namespace public/default")


# -- topic-level policies -------------------------------------------------------------
def _topic_policies_key(name: TopicName) -> str:
    # A partition follows its partitioned topic's policies (policy_keys.py reads them by range).
    base = name.partitioned_base
    return f"{TOPIC_POLICIES}/{base.tenant}/{base.namespace}/{quote(base.local, safe='')}"


async def topic_replication_clusters(store: MetadataStore, name: TopicName) -> list[str] | None:
    """The topic's own ``replication_clusters``, or None: the namespace's apply."""
    found = await _read(store, _topic_policies_key(name))
    if found is None or found[0].get("replication_clusters") is None:
        return None
    return list(found[0]["replication_clusters"])


async def set_topic_replication_clusters(store: MetadataStore, name: TopicName, clusters: list[str] | None) -> None:
    """Set (a validated list) or remove (None) the topic's replication clusters."""
    await set_topic_policy(store, name, "replication_clusters", None if clusters is None else list(clusters))


async def topic_policies(store: MetadataStore, name: TopicName) -> dict:
    """The topic's own policies (only those set; a partition's are its partitioned topic's)."""
    found = await _read(store, _topic_policies_key(name))
    return {k: v for k, v in (found[0] if found else {}).items() if v is not None}


async def set_topic_policy(store: MetadataStore, name: TopicName, field: str, value: Any) -> None:
    """Set one topic-level policy (None: remove it; the namespace's applies again)."""
    key = _topic_policies_key(name)
    for _ in range(_CAS_ATTEMPTS):
        found = await _read(store, key)
        doc, version = (dict(found[0]), found[1]) if found else ({}, -1)
        if value is None:
            doc.pop(field, None)
        else:
            doc[field] = value
        try:
            if not doc:
                if found:
                    await store.delete(key, version)
                return
            await store.put(key, _encode(doc), version)
            return
        except (BadVersion, KeyNotFound):
            continue
    raise PreconditionFailed(f"policies of {name} are being changed concurrently; try again")
