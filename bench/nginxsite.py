"""A real nginx on loopback serving a directory, with a JSON access log to count requests and bytes.

Used by the web benchmark (``bench/bench_web.py``) and the web source's end-to-end test
(``tests/test_web_nginx.py``), which must see the same server: nginx's defaults for validators
(``etag on``, ``if_modified_since exact``), one worker, ``user root`` when run as root (its
workers must read pytest's 0700 temp dirs).

Each access-log entry is a dict: ``msec`` (end of the request, epoch seconds, ms resolution),
``request_time`` (seconds), ``start`` (``msec - request_time``), ``method``, ``uri`` (decoded path),
``request_uri`` (as sent), ``status``, ``body_bytes`` (``$body_bytes_sent``), ``bytes`` (headers
too), ``ims`` / ``inm`` (the conditional request headers, ``""`` when absent) and ``ua``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["Nginx", "NginxError", "find_nginx"]

CONF = """\
{user}worker_processes 1;
daemon off;
master_process on;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 512; }}
http {{
    types {{
        text/html html htm;
        text/plain txt;
        text/css css;
        application/javascript js;
        application/json json;
        application/xml xml;
        image/png png;
        image/svg+xml svg;
    }}
    default_type application/octet-stream;
    log_format crawl escape=json '{{"msec":$msec,"request_time":$request_time,"method":"$request_method",'
        '"uri":"$uri","request_uri":"$request_uri","status":$status,"body_bytes":$body_bytes_sent,'
        '"bytes":$bytes_sent,"ims":"$http_if_modified_since","inm":"$http_if_none_match",'
        '"ua":"$http_user_agent"}}';
    access_log {prefix}/access.log crawl;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    sendfile on;
    keepalive_timeout 65;
    etag on;
    if_modified_since exact;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        index index.html;
    }}
}}
"""


class NginxError(RuntimeError):
    """nginx is missing, refused the generated config, or did not start."""


def find_nginx() -> str:
    """The nginx binary. Raises NginxError (with the Debian package to install) if there is none."""
    exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx",
                                                      "/usr/local/nginx/sbin/nginx") if os.access(p, os.X_OK)), None)
    if exe is None:
        raise NginxError("nginx is not installed (Debian: apt-get install nginx; .ci/run installs it)")
    return exe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx serving ``root`` on ``127.0.0.1:<free port>``, its files under ``prefix``.

    Use as a context manager (or call :meth:`stop`).  ``base`` is ``http://127.0.0.1:PORT``.

    Raises:
        NginxError: see the class.
    """

    def __init__(self, root: Path, prefix: Path) -> None:
        exe = find_nginx()
        self.root, self.prefix = Path(root), Path(prefix)
        (self.prefix / "tmp").mkdir(parents=True, exist_ok=True)
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf = self.prefix / "nginx.conf"
        last = ""
        for _attempt in range(5):  # the port may be taken between choosing and binding it
            self.port = _free_port()
            conf.write_text(CONF.format(user=user, prefix=self.prefix, port=self.port, root=self.root))
            args = ["-p", f"{self.prefix}/", "-e", str(self.prefix / "error.log"), "-c", str(conf)]
            t = subprocess.run([exe, "-t", "-q", *args], capture_output=True, text=True)
            if t.returncode != 0:
                raise NginxError(f"nginx -t refused the generated config: {t.stderr.strip()}")
            self.proc = subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                        self.base = f"http://127.0.0.1:{self.port}"
                        return
                except OSError:
                    time.sleep(0.05)
            self.stop()
            log = self.prefix / "error.log"
            last = (log.read_text() if log.exists() else "") or "did not listen within 10 s"
        raise NginxError(f"nginx did not start: {last.strip()[-500:]}")

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    def mark(self) -> int:
        """The access log's size now: give it to :meth:`log` to read only what follows."""
        time.sleep(0.05)  # nginx writes a line after its response; let the last one land
        return self.access_log.stat().st_size if self.access_log.exists() else 0

    def log(self, since: int = 0, ua: str | None = None) -> list[dict]:
        """Access-log entries after ``since`` (bytes), only those whose User-Agent holds ``ua``."""
        time.sleep(0.05)
        with open(self.access_log, "rb") as f:
            f.seek(since)
            data = f.read().decode("utf-8", "replace")
        out = []
        for line in data.splitlines():
            if line.strip():
                e = json.loads(line)
                if ua is None or ua in e["ua"]:
                    e["start"] = e["msec"] - e["request_time"]
                    out.append(e)
        return out

    def stop(self) -> None:
        """SIGQUIT (graceful), then kill after 10 s; safe to call twice."""
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def __enter__(self) -> "Nginx":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
