"""A broker whose object store cannot be used says so in one line and exits
non-zero, at start, instead of failing its first publishes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from magnetar.metadata.etcd_server import free_port

from .test_startup_errors import one_line


def broker(*args: str, data_dir, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    # The object store is checked before etcd is dialled: no etcd is needed here.
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "broker", "--metadata-store",
                           f"etcd://127.0.0.1:{free_port()}/c", "--data-dir", str(data_dir), "--port", "0",
                           "--admin-port", "0", *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_an_unreachable_object_store_is_one_line_and_exit_1_quickly(tmp_path):
    port = free_port()
    started = time.monotonic()
    done = broker("--object-store", f"s3://bucket/p?endpoint=http://127.0.0.1:{port}", data_dir=tmp_path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith("cannot start: object store s3://bucket/p at http://127.0.0.1:")
    assert "connection refused" in line
    assert time.monotonic() - started < 30


def test_a_missing_bucket_is_one_line_and_exit_1(tmp_path, seaweed):
    done = broker("--object-store", f"s3://no-such-bucket?endpoint={seaweed.endpoint}", data_dir=tmp_path)
    assert done.returncode == 1
    assert "the bucket does not exist" in one_line(done.stderr)


def test_a_bad_url_is_a_configuration_error(tmp_path):
    done = broker("--object-store", "s3://Bad_Bucket/x", data_dir=tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert line.startswith("configuration error: [storage] object store URL") and "not a valid bucket name" in line


def test_half_a_key_pair_is_a_start_error(tmp_path, seaweed, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "only-the-key")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    done = broker("--object-store", seaweed.store_url("p"), data_dir=tmp_path)
    assert done.returncode == 1
    assert "AWS_SECRET_ACCESS_KEY is not set" in one_line(done.stderr)


def test_standalone_refuses_the_object_backend(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[storage]\nbackend = "object"\nobject_store_url = "s3://bucket"\n')
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "standalone", "--config", str(config),
                           "--data-dir", str(tmp_path / "d"), "--port", "0", "--admin-port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'backend = "object" needs a cluster' in one_line(done.stderr)


def test_aws_without_any_credentials_says_so(tmp_path):
    """No keys in the environment or ~/.aws, and no instance metadata service
    (pointed at a closed port here: this machine is no EC2 instance)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_METADATA_ENDPOINT=f"http://127.0.0.1:{free_port()}")
    done = broker("--object-store", "s3://magnetar-ledgers/prod?region=eu-west-1", data_dir=tmp_path / "d", env=env)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "at AWS S3 is not usable: no AWS credentials" in line and "AWS_PROFILE" in line


@pytest.fixture(scope="module")
def not_s3():
    """A plain HTTP server that is no S3 API (a web console's port, say): 404 to everything."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = b"404 page not found"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_HEAD = do_DELETE = _answer

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


def test_an_endpoint_that_is_not_s3_names_the_status_and_what_to_check(tmp_path, not_s3):
    done = broker("--object-store", f"s3://bucket/p?endpoint=http://{not_s3}", data_dir=tmp_path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "the endpoint answered HTTP 404 Not Found to an S3 request" in line, line
    assert "check that endpoint= is the S3 API's address and port" in line and "..." not in line


def test_https_at_an_http_port_names_the_tls_failure_and_the_scheme(tmp_path, not_s3):
    done = broker("--object-store", f"s3://bucket/p?endpoint=https://{not_s3}", data_dir=tmp_path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert "TLS handshake failed: the endpoint does not speak TLS on that port; use http://" in line, line
    assert "..." not in line and "retries" not in line
