"""Small pieces of the ``magnetar`` command line."""
from __future__ import annotations

from magnetar.cli import hoist_admin_json


def test_json_after_the_admin_area_or_command_means_admin_json():
    assert hoist_admin_json(["admin", "tenants", "list", "--json"]) == ["admin", "--json", "tenants", "list"]
    assert hoist_admin_json(["admin", "--url", "http://x:1", "tenants", "--json", "list"]) == \
        ["admin", "--json", "--url", "http://x:1", "tenants", "list"]
    assert hoist_admin_json(["admin", "--json", "tenants", "list"]) == ["admin", "--json", "tenants", "list"]
    assert hoist_admin_json(["produce", "t", "-m", "--json"]) == ["produce", "t", "-m", "--json"]  # not admin's
