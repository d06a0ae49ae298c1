"""What open_object_store hands the S3 client for each kind of URL and AWS
setting (no request is made: these are the settings a user's store sees)."""
from __future__ import annotations

import pytest

from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.store import ObjectStoreConfigError

KEYS = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}


def _config(url: str, environ: dict) -> dict:
    return open_object_store(url, environ=environ)._store.config


def test_aws_with_keys_from_the_environment_is_signed():
    config = _config("s3://ledgers/prod?region=eu-west-1", {**KEYS, "AWS_SESSION_TOKEN": "T"})
    assert (config["access_key_id"], config["secret_access_key"], config["session_token"]) == ("AK", "SK", "T")
    assert config["region"] == "eu-west-1" and "endpoint" not in config and "skip_signature" not in config


def test_an_endpoint_is_path_style_and_plain_http_is_allowed_for_it():
    store = open_object_store("s3://ledgers?endpoint=http://10.0.0.9:8333", environ=KEYS)
    assert store._store.config["endpoint"] == "http://10.0.0.9:8333"
    assert store._store.config["virtual_hosted_style_request"] == "false"
    assert store._store.client_options["allow_http"] == "true"
    https = open_object_store("s3://ledgers?endpoint=https://s3.example.com", environ=KEYS)
    assert https._store.client_options["allow_http"] == "false"


def test_no_credentials_with_an_endpoint_goes_unsigned(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws
    assert _config("s3://ledgers?endpoint=http://127.0.0.1:8333", {})["skip_signature"] == "true"


def test_web_identity_is_left_to_the_client(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    config = _config("s3://ledgers", {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token", "AWS_ROLE_ARN": "arn:x"})
    assert config["web_identity_token_file"] == "/var/run/token" and config["role_arn"] == "arn:x"
    assert "skip_signature" not in config


def test_a_directory_bucket_turns_s3_express_on():
    assert _config("s3://ledgers--usw2-az1--x-s3/p?region=us-west-2", KEYS)["s3_express"] == "true"
    assert "s3_express" not in _config("s3://ledgers/p", KEYS)


def test_the_prefix_is_the_stores():
    assert open_object_store("s3://ledgers/a/b", environ=KEYS)._store.prefix == "a/b"


def test_bad_aws_settings_fail_before_any_request():
    with pytest.raises(ObjectStoreConfigError, match="AWS_SECRET_ACCESS_KEY is not set"):
        open_object_store("s3://ledgers", environ={"AWS_ACCESS_KEY_ID": "AK"})
