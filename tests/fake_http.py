"""The base of the small HTTP servers the tests and benchmarks stand in for a Proxy, an engine or a backend."""

from http.server import BaseHTTPRequestHandler


class FakeHandler(BaseHTTPRequestHandler):
    """``BaseHTTPRequestHandler`` that logs nothing and answers a whole body in one call (``answer``)."""

    def answer(self, data: bytes, content_type="application/json", status=200):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass
