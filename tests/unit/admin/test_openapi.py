"""Every admin route is described in the OpenAPI document, and only those."""
from __future__ import annotations

import re

from magnetar.admin.app import OPENAPI, build_app


class _NoBroker:
    service = None
    store = None


def _app():
    return build_app(_NoBroker())


#: Served but not API: the web console's page and files, and its relay to a topic's
#: owner of the admin API's topic paths (described under /admin/v2/persistent).
UNDESCRIBED = {"/console", "/console/", "/console/{path}",
               "/console/api/owner/{tenant}/{namespace}/{topic}/{rest}"}


def test_every_route_is_described():
    app = _app()
    spec = app[OPENAPI]
    served = {(r.method.lower(), r.resource.canonical) for r in app.router.routes()
              if r.resource.canonical not in UNDESCRIBED}
    described = {(method, path) for path, ops in spec["paths"].items() for method in ops}
    assert served == described
    assert len(served) > 40


def test_descriptions_are_complete():
    spec = _app()[OPENAPI]
    ids = []
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            ids.append(op["operationId"])
            assert op["summary"] and op["tags"], (method, path)
            declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
            assert declared == set(re.findall(r"{(\w+)}", path)), (method, path)
            assert any(code.startswith("2") for code in op["responses"]), (method, path)
            assert "500" in op["responses"]
    assert len(ids) == len(set(ids)), "operation ids must be unique"
    assert spec["openapi"].startswith("3.") and "Error" in spec["components"]["schemas"]


def test_body_and_query_are_described():
    paths = _app()[OPENAPI]["paths"]
    retention = paths["/admin/v2/namespaces/{tenant}/{namespace}/retention"]["post"]
    assert retention["requestBody"]["required"]
    assert set(retention["requestBody"]["content"]["application/json"]["schema"]["required"]) == {
        "retentionTimeInMinutes", "retentionSizeInMB"}
    delete_ns = paths["/admin/v2/namespaces/{tenant}/{namespace}"]["delete"]
    assert [p["name"] for p in delete_ns["parameters"] if p["in"] == "query"] == ["force"]
