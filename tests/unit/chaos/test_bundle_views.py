"""A failed final read says how each broker sees the bundles, in one line:
CI keeps the tail of the output, not the brokers' logs."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from magnetar_chaos.runner import bundle_views

ANSWER = {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2,
          "owners": {"0x00000000_0x80000000": "10.0.0.1:8080", "0x80000000_0xffffffff": None},
          "states": {"0x00000000_0x80000000": "Owned", "0x80000000_0xffffffff": "Assigning"}}


class _Bundles(BaseHTTPRequestHandler):
    def do_GET(self):
        assert self.path == "/admin/v2/namespaces/public/default/bundles"
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_each_brokers_view_or_its_silence_in_one_line():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bundles)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        live = f"http://127.0.0.1:{server.server_address[1]}"
        # A port nobody listens on: the server's, once closed.
        closed = ThreadingHTTPServer(("127.0.0.1", 0), _Bundles)
        gone = f"http://127.0.0.1:{closed.server_address[1]}"
        closed.server_close()
        line = bundle_views(SimpleNamespace(admin_urls=[live, gone]), timeout_s=2.0)
    finally:
        server.shutdown()
        server.server_close()
    assert "\n" not in line
    assert line.startswith("bundles as each broker sees them: ")
    assert f"{live.removeprefix('http://')} sees 0x00000000_0x80000000 Owned on 10.0.0.1:8080, " \
           f"0x80000000_0xffffffff Assigning" in line
    assert f"{gone.removeprefix('http://')} did not answer (" in line


def test_a_system_with_one_admin_url_is_asked_there():
    line = bundle_views(SimpleNamespace(admin_url="http://127.0.0.1:9"), timeout_s=1.0)
    assert "127.0.0.1:9 did not answer" in line
