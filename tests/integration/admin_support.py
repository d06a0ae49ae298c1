"""Helpers for the admin API tests: raw HTTP calls that return the status and
the decoded answer, and assertions on them."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from magnetar_harness.broker import BrokerProcess

_NO_BODY = object()


def call(broker: BrokerProcess, method: str, path: str, body: Any = _NO_BODY, raw: bytes | None = None):
    """``(status, decoded JSON or None)`` of ``method /admin/v2/<path>``; never raises for HTTP errors."""
    data = raw if raw is not None else (None if body is _NO_BODY else json.dumps(body).encode())
    req = urllib.request.Request(f"{broker.admin_url}/admin/v2/{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, payload = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, exc.read()
    return status, (json.loads(payload) if payload else None)


def ok(broker: BrokerProcess, method: str, path: str, body: Any = _NO_BODY) -> Any:
    status, answer = call(broker, method, path, body)
    assert status in (200, 204), f"{method} {path}: {status} {answer}"
    return answer


def refused(broker: BrokerProcess, method: str, path: str, status: int, body: Any = _NO_BODY,
            raw: bytes | None = None, reason: str = "") -> str:
    """Assert the call fails with ``status`` and a JSON reason (containing ``reason``); return the reason."""
    got, answer = call(broker, method, path, body, raw)
    assert got == status, f"{method} {path}: expected {status}, got {got} {answer}"
    assert isinstance(answer, dict) and answer.get("reason"), answer
    assert reason.lower() in answer["reason"].lower(), answer
    return answer["reason"]
