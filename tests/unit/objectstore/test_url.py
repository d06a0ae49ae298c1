"""Object store URLs and AWS credentials: what is accepted, and one clear
line for what is not."""
from __future__ import annotations

import pytest

from magnetar.objectstore.store import ObjectStoreConfigError
from magnetar.objectstore.url import ObjectStoreURL, parse_url, resolve_credentials, resolve_region


def test_full_url():
    url = parse_url("s3://my-bucket/ledgers/prod?endpoint=https://s3.example.com:9000/&region=eu-west-1")
    assert url == ObjectStoreURL("my-bucket", "ledgers/prod", "https://s3.example.com:9000", "eu-west-1")
    assert str(url) == "s3://my-bucket/ledgers/prod?endpoint=https://s3.example.com:9000&region=eu-west-1"


def test_bucket_only():
    assert parse_url("s3://abc") == ObjectStoreURL("abc")
    assert parse_url("s3://abc/") == ObjectStoreURL("abc")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "empty"),
        ("http://bucket/x", "must start with s3://"),
        ("bucket/x", "must start with s3://"),
        ("s3://ab", "not a valid bucket name"),
        ("s3://My_Bucket", "not a valid bucket name"),
        ("s3://-bucket", "not a valid bucket name"),
        ("s3:///prefix", "not a valid bucket name"),
        ("s3://key:secret@bucket", "no credentials or port"),
        ("s3://bucket:9000", "no credentials or port"),
        ("s3://bucket/a//b", "empty path segment"),
        ("s3://bucket?endpoint=ftp://x", "must be http://HOST"),
        ("s3://bucket?endpoint=localhost:9000", "must be http://HOST"),
        ("s3://bucket?endpoint=http://h:99999", "bad port"),
        ("s3://bucket?endpoint=http://h/bucket", "no path or query"),
        ("s3://bucket?endpoint=", "'endpoint' is empty"),
        ("s3://bucket?region=a&region=b", "given twice"),
        ("s3://bucket?regoin=x", "unknown parameter 'regoin'"),
        ("s3://bucket#frag", "unexpected '#frag'"),
    ],
)
def test_bad_urls_are_one_clear_line(url, says):
    with pytest.raises(ObjectStoreConfigError, match=None) as error:
        parse_url(url)
    assert says in str(error.value)
    assert "\n" not in str(error.value)


def test_credentials_from_the_environment(tmp_path):
    env = {"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "T"}
    creds = resolve_credentials(env, home=tmp_path)
    assert (creds.access_key_id, creds.secret_access_key, creds.session_token, creds.source) == ("AK", "SK", "T", "environment")


def test_half_a_key_pair_is_an_error(tmp_path):
    with pytest.raises(ObjectStoreConfigError, match="AWS_SECRET_ACCESS_KEY is not set"):
        resolve_credentials({"AWS_ACCESS_KEY_ID": "AK"}, home=tmp_path)


def _aws_files(home, credentials: str = "", config: str = "") -> None:
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(credentials)
    (home / ".aws" / "config").write_text(config)


def test_credentials_and_region_from_the_profile_files(tmp_path):
    _aws_files(
        tmp_path,
        credentials="[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
        "[work]\naws_access_key_id = W\naws_secret_access_key = WS\n",
        config="[default]\nregion = us-west-2\n[profile work]\nregion = eu-central-1\n",
    )
    creds = resolve_credentials({}, home=tmp_path)
    assert (creds.access_key_id, creds.secret_access_key) == ("D", "DS")
    assert "profile 'default'" in creds.source
    assert resolve_region(parse_url("s3://bucket"), {}, home=tmp_path) == "us-west-2"
    work = {"AWS_PROFILE": "work"}
    assert resolve_credentials(work, home=tmp_path).access_key_id == "W"
    assert resolve_region(parse_url("s3://bucket"), work, home=tmp_path) == "eu-central-1"
    # The URL's region wins over everything; then the environment's.
    assert resolve_region(parse_url("s3://bucket?region=ap-south-1"), work, home=tmp_path) == "ap-south-1"
    assert resolve_region(parse_url("s3://bucket"), {"AWS_REGION": "sa-east-1"}, home=tmp_path) == "sa-east-1"


def test_keys_in_the_config_file_count_too(tmp_path):
    _aws_files(tmp_path, config="[profile p]\naws_access_key_id = C\naws_secret_access_key = CS\n")
    assert resolve_credentials({"AWS_PROFILE": "p"}, home=tmp_path).access_key_id == "C"


def test_no_credentials_anywhere_is_none_and_region_defaults(tmp_path):
    assert resolve_credentials({}, home=tmp_path) is None
    assert resolve_region(parse_url("s3://bucket"), {}, home=tmp_path) == "us-east-1"


def test_a_named_profile_that_does_not_exist_is_an_error(tmp_path):
    _aws_files(tmp_path, credentials="[default]\naws_access_key_id = D\naws_secret_access_key = DS\n")
    with pytest.raises(ObjectStoreConfigError, match="AWS profile 'nope' is not in"):
        resolve_credentials({"AWS_PROFILE": "nope"}, home=tmp_path)


def test_a_profile_that_needs_sso_says_what_to_do(tmp_path):
    _aws_files(tmp_path, config="[profile sso]\nsso_session = corp\nregion = us-east-1\n")
    with pytest.raises(ObjectStoreConfigError, match="sso_session.*export AWS_ACCESS_KEY_ID"):
        resolve_credentials({"AWS_PROFILE": "sso"}, home=tmp_path)


def test_an_unreadable_settings_file_is_one_line(tmp_path):
    _aws_files(tmp_path, credentials="this is not ini\n")
    with pytest.raises(ObjectStoreConfigError, match="cannot read AWS settings file") as error:
        resolve_credentials({}, home=tmp_path)
    assert "\n" not in str(error.value)


def test_conditional_put_switch():
    assert parse_url("s3://bucket").conditional_put is True
    url = parse_url("s3://bucket?conditional_put=off")
    assert url.conditional_put is False and str(url) == "s3://bucket?conditional_put=off"
    assert parse_url("s3://bucket?conditional_put=on").conditional_put is True
    with pytest.raises(ObjectStoreConfigError, match="conditional_put must be on or off, not 'maybe'"):
        parse_url("s3://bucket?conditional_put=maybe")
