"""A small blocking client of the admin REST API (standard library only).

``AdminClient(url)`` has one method per operation; each returns the decoded
JSON answer (None for 204) or raises :class:`AdminApiError` with the HTTP
status and the broker's reason. A broker that cannot be reached raises
:class:`AdminUnreachable`. Topic arguments take full names
(``persistent://t/ns/x``) or Pulsar's short forms (``x``, ``t/ns/x``).

It never imports the broker: the CLI uses it from any machine.
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any
from urllib.parse import quote

from magnetar.security import tls

_NO_BODY = object()
#: Redirects followed for one call (a topic's owner moved between two answers: one more).
_MAX_REDIRECTS = 3


class AdminApiError(Exception):
    """The broker refused the request: ``status`` and ``reason`` say why."""

    def __init__(self, status: int, reason: str, method: str, path: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason
        self.method = method
        self.path = path


class AdminUnreachable(Exception):
    """No answer from the admin URL (refused, timed out, bad URL)."""


def _seg(text: str) -> str:
    return quote(text, safe="")


def topic_path(topic: str) -> str:
    """``persistent://t/ns/x`` (or ``x``, ``t/ns/x``) -> ``persistent/t/ns/x`` (segments quoted)."""
    domain, rest = ("persistent", topic)
    if "://" in topic:
        domain, rest = topic.split("://", 1)
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if domain != "persistent" or len(parts) != 3:
        raise ValueError(f"invalid topic {topic!r}: expected persistent://tenant/namespace/topic or a short name")
    for what, part in zip(("tenant", "namespace", "topic"), parts):
        if not part:
            raise ValueError(f"invalid topic {topic!r}: the {what} part is empty "
                             "(expected persistent://tenant/namespace/topic)")
    return "persistent/" + "/".join(_seg(p) for p in parts)


def namespace_path(namespace: str) -> str:
    parts = namespace.strip("/").split("/")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"invalid namespace {namespace!r}: expected tenant/namespace")
    return "/".join(_seg(p) for p in parts)


def message_id_body(text: str) -> Any:
    """``earliest`` / ``latest`` / ``ledger:entry`` -> the JSON body the API takes."""
    if text in ("earliest", "latest"):
        return text
    ledger, sep, entry = text.partition(":")
    if sep and ledger.lstrip("-").isdigit() and entry.lstrip("-").isdigit():
        return {"ledgerId": int(ledger), "entryId": int(entry)}
    raise ValueError(f"invalid message id {text!r}: use earliest, latest or ledger:entry")


class AdminClient:
    """``auth_token`` (a JWT) or ``basic_auth`` (``user:password``) go in the
    Authorization header; for an https URL, ``tls_trust_certs_file`` verifies
    the broker and ``tls_cert_file``/``tls_key_file`` present a client
    certificate (the tls provider). Raises TlsSetupError for unusable files."""

    def __init__(self, url: str = "http://localhost:8080", timeout: float = 30.0, *, auth_token: str = "",
                 basic_auth: str = "", tls_trust_certs_file: str = "", tls_cert_file: str = "",
                 tls_key_file: str = "", tls_allow_insecure: bool = False) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if auth_token:
            self._headers["Authorization"] = f"Bearer {auth_token.strip()}"
        elif basic_auth:
            self._headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        self._ssl = None
        if self.url.startswith("https://"):
            self._ssl = tls.client_context(tls_trust_certs_file, tls_cert_file, tls_key_file,
                                           allow_insecure=tls_allow_insecure)

    # -- transport ----------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = _NO_BODY, query: dict | None = None) -> Any:
        raw, _ = self.exchange(method, path, body, query)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode(errors="replace")

    def exchange(self, method: str, path: str, body: Any = _NO_BODY, query: dict | None = None) -> tuple[bytes, Any]:
        """The raw answer and its headers; raises AdminApiError / AdminUnreachable."""
        # "tenants/x" is under /admin/v2/; an absolute "/lookup/v2/..." is taken as it is.
        url = f"{self.url}{path}" if path.startswith("/") else f"{self.url}/admin/v2/{path}"
        if query:
            url += "?" + "&".join(f"{k}={_seg(str(v).lower() if isinstance(v, bool) else str(v))}"
                                  for k, v in query.items())
        data = None if body is _NO_BODY else json.dumps(body).encode()
        for hops in range(_MAX_REDIRECTS + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl) as resp:
                    return resp.read(), resp.headers
            except urllib.error.HTTPError as exc:
                # A topic's operations are answered by its owner: another broker
                # of the cluster answers 307 there. urllib follows it for GET
                # only; the same method and body go to the owner here.
                location = exc.headers.get("Location") if exc.code in (307, 308) else None
                if location and hops < _MAX_REDIRECTS:
                    exc.read()
                    url = urllib.parse.urljoin(url, location)
                    continue
                self._raise(exc, method, path)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                cause = getattr(exc, "reason", exc)
                raise AdminUnreachable(f"cannot reach the admin API at {self.url}: {cause}") from None
        raise AdminUnreachable(f"too many redirects from {self.url}")  # pragma: no cover

    @staticmethod
    def _raise(exc: urllib.error.HTTPError, method: str, path: str) -> None:
        raw = exc.read()
        try:
            reason = json.loads(raw)["reason"]
        except (ValueError, KeyError, TypeError):
            reason = raw.decode(errors="replace") or exc.reason
        raise AdminApiError(exc.code, reason, method, path) from None

    # -- clusters, tenants ---------------------------------------------------------
    def clusters(self) -> list[str]:
        return self.request("GET", "clusters")

    def cluster(self, name: str) -> dict:
        return self.request("GET", f"clusters/{_seg(name)}")

    def tenants(self) -> list[str]:
        return self.request("GET", "tenants")

    def tenant(self, name: str) -> dict:
        return self.request("GET", f"tenants/{_seg(name)}")

    def create_tenant(self, name: str, allowed_clusters: list[str] | None = None,
                      admin_roles: list[str] | None = None) -> None:
        body: dict = {"adminRoles": admin_roles or []}
        if allowed_clusters:
            body["allowedClusters"] = allowed_clusters
        self.request("PUT", f"tenants/{_seg(name)}", body)

    def delete_tenant(self, name: str) -> None:
        self.request("DELETE", f"tenants/{_seg(name)}")

    # -- namespaces ----------------------------------------------------------------
    def namespaces(self, tenant: str) -> list[str]:
        return self.request("GET", f"namespaces/{_seg(tenant)}")

    def create_namespace(self, namespace: str, clusters: list[str] | None = None) -> None:
        if clusters:
            self.request("PUT", f"namespaces/{namespace_path(namespace)}", body={"replication_clusters": clusters})
        else:
            self.request("PUT", f"namespaces/{namespace_path(namespace)}")

    def replication_clusters(self, namespace: str) -> list[str]:
        return self.request("GET", f"namespaces/{namespace_path(namespace)}/replication")

    def set_replication_clusters(self, namespace: str, clusters: list[str]) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/replication", body=clusters)

    def permissions(self, namespace: str) -> dict:
        return self.request("GET", f"namespaces/{namespace_path(namespace)}/permissions")

    def grant_permission(self, namespace: str, role: str, actions: list[str]) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/permissions/{_seg(role)}", body=actions)

    def revoke_permission(self, namespace: str, role: str) -> None:
        self.request("DELETE", f"namespaces/{namespace_path(namespace)}/permissions/{_seg(role)}")

    def schema(self, topic: str, version: int | None = None) -> dict:
        path = topic_path(topic).replace("persistent/", "schemas/", 1) + "/schema"
        return self.request("GET", path if version is None else f"{path}/{version}")

    def upload_schema(self, topic: str, payload: dict) -> dict:
        return self.request("POST", topic_path(topic).replace("persistent/", "schemas/", 1) + "/schema", body=payload)

    def delete_schema(self, topic: str) -> dict:
        return self.request("DELETE", topic_path(topic).replace("persistent/", "schemas/", 1) + "/schema")

    def last_message_id(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/lastMessageId")

    def compact(self, topic: str) -> None:
        self.request("PUT", f"{topic_path(topic)}/compaction")

    def compaction_status(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/compaction")

    def topic_permissions(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/permissions")

    def grant_topic_permission(self, topic: str, role: str, actions: list[str]) -> None:
        self.request("POST", f"{topic_path(topic)}/permissions/{_seg(role)}", body=actions)

    def revoke_topic_permission(self, topic: str, role: str) -> None:
        self.request("DELETE", f"{topic_path(topic)}/permissions/{_seg(role)}")

    def topic_replication_clusters(self, topic: str, applied: bool = False) -> list[str]:
        return self.request("GET", f"{topic_path(topic)}/replication", query={"applied": True} if applied else None)

    def set_topic_replication_clusters(self, topic: str, clusters: list[str]) -> None:
        self.request("POST", f"{topic_path(topic)}/replication", body=clusters)

    def remove_topic_replication_clusters(self, topic: str) -> None:
        self.request("DELETE", f"{topic_path(topic)}/replication")

    def delete_namespace(self, namespace: str, force: bool = False) -> None:
        self.request("DELETE", f"namespaces/{namespace_path(namespace)}", query={"force": force} if force else None)

    def policies(self, namespace: str) -> dict:
        return self.request("GET", f"namespaces/{namespace_path(namespace)}")

    def set_retention(self, namespace: str, minutes: int, size_mb: int) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/retention",
                     {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb})

    def retention(self, namespace: str) -> dict | None:
        return self.request("GET", f"namespaces/{namespace_path(namespace)}/retention")

    def set_message_ttl(self, namespace: str, seconds: int) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/messageTTL", seconds)

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/deduplication", enabled)

    def set_backlog_quota(self, namespace: str, quota_type: str, limit_size: int, limit_time: int,
                          policy: str) -> None:
        self.request("POST", f"namespaces/{namespace_path(namespace)}/backlogQuota",
                     {"limitSize": limit_size, "limitTime": limit_time, "policy": policy},
                     query={"backlogQuotaType": quota_type})

    def backlog_quotas(self, namespace: str) -> dict:
        return self.request("GET", f"namespaces/{namespace_path(namespace)}/backlogQuotaMap")

    def remove_backlog_quota(self, namespace: str, quota_type: str) -> None:
        self.request("DELETE", f"namespaces/{namespace_path(namespace)}/backlogQuota",
                     query={"backlogQuotaType": quota_type})

    # -- topics ----------------------------------------------------------------------
    def topics(self, namespace: str) -> list[str]:
        return self.request("GET", f"persistent/{namespace_path(namespace)}")

    def partitioned_topics(self, namespace: str) -> list[str]:
        return self.request("GET", f"persistent/{namespace_path(namespace)}/partitioned")

    def create_topic(self, topic: str) -> None:
        self.request("PUT", topic_path(topic))

    def delete_topic(self, topic: str, force: bool = False) -> None:
        self.request("DELETE", topic_path(topic), query={"force": force} if force else None)

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.request("PUT", f"{topic_path(topic)}/partitions", partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.request("POST", f"{topic_path(topic)}/partitions", partitions)

    def partitioned_topic_metadata(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/partitions")

    def delete_partitioned_topic(self, topic: str, force: bool = False) -> None:
        self.request("DELETE", f"{topic_path(topic)}/partitions", query={"force": force} if force else None)

    def stats(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/stats")

    def internal_stats(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/internalStats")

    def partitioned_stats(self, topic: str) -> dict:
        return self.request("GET", f"{topic_path(topic)}/partitioned-stats")

    def unload(self, topic: str) -> None:
        self.request("PUT", f"{topic_path(topic)}/unload")

    def terminate(self, topic: str) -> dict:
        return self.request("POST", f"{topic_path(topic)}/terminate")

    # -- subscriptions -------------------------------------------------------------
    def subscriptions(self, topic: str) -> list[str]:
        return self.request("GET", f"{topic_path(topic)}/subscriptions")

    def _sub(self, topic: str, subscription: str) -> str:
        return f"{topic_path(topic)}/subscription/{_seg(subscription)}"

    def create_subscription(self, topic: str, subscription: str, message_id: str = "latest") -> None:
        self.request("PUT", self._sub(topic, subscription), message_id_body(message_id))

    def delete_subscription(self, topic: str, subscription: str, force: bool = False) -> None:
        self.request("DELETE", self._sub(topic, subscription), query={"force": force} if force else None)

    def reset_cursor_to_time(self, topic: str, subscription: str, timestamp_ms: int) -> None:
        self.request("POST", f"{self._sub(topic, subscription)}/resetcursor/{int(timestamp_ms)}")

    def reset_cursor_to_message(self, topic: str, subscription: str, message_id: str) -> None:
        self.request("POST", f"{self._sub(topic, subscription)}/resetcursor", message_id_body(message_id))

    def skip(self, topic: str, subscription: str, count: int) -> None:
        self.request("POST", f"{self._sub(topic, subscription)}/skip/{int(count)}")

    def peek_message(self, topic: str, subscription: str, position: int) -> tuple[bytes, dict[str, str]]:
        """The ``position``-th (from 1) unacknowledged entry: its payload and X-Pulsar-* headers."""
        raw, headers = self.exchange("GET", f"{self._sub(topic, subscription)}/position/{int(position)}")
        return raw, {k: v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}

    def message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> tuple[bytes, dict[str, str]]:
        """The entry at ``ledger_id:entry_id``: its payload and X-Pulsar-* headers."""
        raw, headers = self.exchange("GET", f"{topic_path(topic)}/ledger/{int(ledger_id)}/entry/{int(entry_id)}")
        return raw, {k: v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}

    def examine_message(self, topic: str, initial_position: str, n: int) -> tuple[bytes, dict[str, str]]:
        """The ``n``-th (from 1) stored entry from ``earliest`` or ``latest``."""
        raw, headers = self.exchange("GET", f"{topic_path(topic)}/examinemessage",
                                     query={"initialPosition": initial_position, "messagePosition": int(n)})
        return raw, {k: v for k, v in headers.items() if k.lower().startswith("x-pulsar-")}

    def skip_all(self, topic: str, subscription: str) -> None:
        self.request("POST", f"{self._sub(topic, subscription)}/skip_all")

    def expire_messages(self, topic: str, subscription: str, seconds: int) -> None:
        self.request("POST", f"{self._sub(topic, subscription)}/expireMessages/{int(seconds)}")
