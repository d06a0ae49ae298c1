"""Topic names: ``persistent://tenant/namespace/local-name[-partition-N]``.

Clients may send short forms; :func:`parse` completes them the way Pulsar does:
``my-topic`` -> ``persistent://public/default/my-topic`` and
``tenant/ns/t`` -> ``persistent://tenant/ns/t``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PARTITION_SUFFIX = "-partition-"
_NAME_PART = re.compile(r"^[-=:.\w]+$")


class InvalidTopicName(ValueError):
    """The string is not a valid topic name."""


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local: str

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def partition_index(self) -> int:
        base, sep, idx = self.local.rpartition(PARTITION_SUFFIX)
        return int(idx) if sep and base and idx.isdigit() else -1

    @property
    def partitioned_base(self) -> "TopicName":
        """The topic without its ``-partition-N`` suffix (itself if none)."""
        if self.partition_index < 0:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, self.local.rpartition(PARTITION_SUFFIX)[0])

    def partition(self, index: int) -> "TopicName":
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    @property
    def managed_ledger_name(self) -> str:
        """The storage name: ``tenant/namespace/persistent/local`` (Pulsar's layout)."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.local}"


def parse(name: str) -> TopicName:
    """Parse and complete a topic name; raise InvalidTopicName with the reason."""
    if not name or len(name) > 1024:
        raise InvalidTopicName(f"invalid topic name {name!r}: empty or too long")
    domain = "persistent"
    rest = name
    if "://" in name:
        domain, rest = name.split("://", 1)
        if domain not in ("persistent", "non-persistent"):
            raise InvalidTopicName(f"invalid topic name {name!r}: unknown domain {domain!r}")
    parts = rest.split("/")
    if len(parts) == 1 and "://" not in name:
        parts = ["public", "default", parts[0]]
    if len(parts) != 3:
        raise InvalidTopicName(
            f"invalid topic name {name!r}: expected persistent://tenant/namespace/topic or a short name"
        )
    tenant, namespace, local = parts
    for what, part in (("tenant", tenant), ("namespace", namespace), ("topic", local)):
        if not part:
            raise InvalidTopicName(f"invalid topic name {name!r}: the {what} part is empty "
                                   "(expected persistent://tenant/namespace/topic)")
        if not _NAME_PART.match(part):
            raise InvalidTopicName(f"invalid topic name {name!r}: bad characters in {part!r}")
    return TopicName(domain, tenant, namespace, local)
