"""Policy keys in bulk: a namespace's topic-level policy documents and a
tenant's namespace policies read by range, and whose policies a changed key
under the policy roots concerns.

:mod:`.resources` lays the keys out
(``/admin/topic-policies/<tenant>/<namespace>/<topic>``, the topic's local
name quoted, a partition's under its partitioned topic); this module reads
them many at a time for the rounds over loaded topics (:mod:`.applied`) and
maps a watch's changed key to the topics to refresh (the service). Reads
raise what the store raises.
"""
from __future__ import annotations

from urllib.parse import unquote

from magnetar.metadata.store import MetadataStore

from magnetar.broker.topic_name import TopicName

from . import resources

#: Policy documents per range read (a few hundred bytes each).
TOPIC_POLICIES_PAGE = 500


async def namespace_topic_policies(store: MetadataStore, namespace: str, page: int | None = None) -> dict[str, dict]:
    """Every topic's own policies in ``namespace`` (those set), by the local
    name of the (partitioned) topic they belong to: a partition's are under
    its partitioned topic's name. One range read per ``page`` documents
    (``children_records``; None: :data:`TOPIC_POLICIES_PAGE`), where
    :func:`.resources.topic_policies` costs a read per topic; topics with
    none set are absent. Raises what the store raises, InvalidInput for a
    malformed namespace."""
    tenant, ns = resources.split_namespace(namespace)
    base = f"{resources.TOPIC_POLICIES}/{tenant}/{ns}"
    page = TOPIC_POLICIES_PAGE if page is None else page
    found: dict[str, dict] = {}
    start = ""
    while True:
        records = await store.children_records(base, start, page)
        for record in records:
            child = record.key.rsplit("/", 1)[1]
            doc = {k: v for k, v in resources.decode_document(record.key, record.value).items() if v is not None}
            if doc:
                found[unquote(child)] = doc
        if len(records) < page:
            return found
        start = records[-1].key.rsplit("/", 1)[1] + "\x00"


async def tenant_namespace_policies(store: MetadataStore, tenant: str) -> dict[str, dict]:
    """The policies of every namespace of ``tenant`` (``tenant/ns`` -> every
    field of :data:`.resources.POLICY_FIELDS`, as
    :func:`.resources.namespace_policies` gives them), in range reads of
    :data:`TOPIC_POLICIES_PAGE` records, not a read per namespace. Empty for
    a tenant without namespaces (or none). Raises what the store raises,
    InvalidInput for a malformed tenant name."""
    resources.check_name("tenant", tenant)
    base = f"{resources.POLICIES}/{tenant}"
    found: dict[str, dict] = {}
    start = ""
    while True:
        records = await store.children_records(base, start, TOPIC_POLICIES_PAGE)
        for record in records:
            ns = record.key.rsplit("/", 1)[1]
            found[f"{tenant}/{ns}"] = {**resources.POLICY_FIELDS, **resources.decode_document(record.key, record.value)}
        if len(records) < TOPIC_POLICIES_PAGE:
            return found
        start = records[-1].key.rsplit("/", 1)[1] + "\x00"


#: :func:`changed_policies` of a key whose change may concern every topic.
EVERY_TOPIC = (None, None)


def changed_policies(key: str) -> tuple[str | None, str | None] | None:
    """Whose policies a change of ``key`` (under :data:`.resources.POLICIES`
    or :data:`.resources.TOPIC_POLICIES`) may have changed: ``(namespace,
    None)`` every topic of the namespace, ``(namespace, local)`` the topic
    ``local`` and its partitions, None no topic's (a tenant's record),
    :data:`EVERY_TOPIC` for a key of no known shape."""
    for root, topic_level in ((resources.POLICIES, False), (resources.TOPIC_POLICIES, True)):
        if not (key == root or key.startswith(root + "/")):
            continue
        parts = key[len(root) + 1:].split("/") if key != root else []
        if len(parts) == 1 and not topic_level:
            return None  # a tenant: its roles and clusters are no topic's policies
        if len(parts) == 2 or (len(parts) > 2 and not topic_level):
            return f"{parts[0]}/{parts[1]}", None
        if len(parts) == 3:
            return f"{parts[0]}/{parts[1]}", unquote(parts[2])
    return EVERY_TOPIC


def topic_policies_child(name: TopicName) -> str:
    """The local name :func:`namespace_topic_policies` files ``name``'s own policies under."""
    return name.partitioned_base.local
