"""Debian's nginx with its njs module running deploy/nginx/openai-router.conf as docs/placement.md says (its four
marked values set), for the tests and the gateway benchmark."""

import socket
from pathlib import Path

from tests.live import ROOT, ChildProcess, free_port

SITE = ROOT / "deploy" / "nginx" / "openai-router.conf"
MODULE = "/usr/lib/nginx/modules/ngx_http_js_module.so"


def site_with(proxy_port, token, listen, replace=()):
    """The site's text with its four marked values set; ``replace``: further ``(text, by, times)`` edits."""
    site = SITE.read_text()
    assert site.count("# SET") == 4
    for text, by, times in [
        ("js_path /etc/nginx/njs;", f"js_path {SITE.parent};", 1),
        ("server 127.0.0.1:8001;", f"server 127.0.0.1:{proxy_port};", 1),
        ("SET-A-ROUTE-TOKEN", token, 1),
        ("listen 8080;", f"listen {listen};", 1),
        *replace,
    ]:
        assert site.count(text) == times, text
        site = site.replace(text, by)
    return site


class OpenAIRouter(ChildProcess):
    """nginx with the njs site; ``extra``: more of an ``http`` block's text (another server, for a benchmark)."""

    kind = "nginx"

    def __init__(self, tmp_path, proxy_port, token, replace=(), extra="", access_log=True):
        self.port = free_port()
        self.prefix = Path(tmp_path) / f"nginx-{self.port}"
        (self.prefix / "logs").mkdir(parents=True, exist_ok=True)
        self.log_path = self.prefix / "logs" / "error.log"
        site = site_with(proxy_port, token, f"127.0.0.1:{self.port}", replace)
        (self.prefix / "fleetwatch-openai.conf").write_text(site)
        access_log = f"{self.prefix}/logs/access.log" if access_log else "off"
        (self.prefix / "nginx.conf").write_text(f"""
load_module {MODULE};
worker_processes 1;
error_log {self.log_path} info;
pid {self.prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log {access_log};
    client_body_temp_path {self.prefix}/body;
    proxy_temp_path {self.prefix}/proxy;
    fastcgi_temp_path {self.prefix}/fastcgi;
    uwsgi_temp_path {self.prefix}/uwsgi;
    scgi_temp_path {self.prefix}/scgi;
    include {self.prefix}/fleetwatch-openai.conf;
{extra}
}}
""")

    def argv(self):
        return ["nginx", "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"), "-g", "daemon off;"]

    def _ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"nginx exited with {self.process.returncode}; log:\n{self.log()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0
