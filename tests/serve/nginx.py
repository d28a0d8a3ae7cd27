"""A real nginx (Debian's) for tests: one process in the foreground, its own prefix, pid, logs
and temp directories under a temporary directory, on a free loopback port; and a tiny upstream
application that counts what reaches it."""
import http.server
import os
import shutil
import signal
import subprocess
import tempfile
import socket
import threading

from harness import free_port, wait_until

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

MAIN_CONF = """daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/site.conf;
}}
"""


class Upstream:
    """An application answering 200 "upstream <path>" to every request, counting them."""

    def __init__(self):
        self.port = free_port()
        self.hits = 0
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                upstream.hits += 1
                body = ("upstream " + self.path + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.handle_error = lambda request, address: None  # a proxy closing: no trace
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Nginx:
    """nginx serving `site` (an http-context config that listens on 127.0.0.1:`port`); ready
    when the constructor returns."""

    def __init__(self, site, port):
        self.dir = tempfile.mkdtemp(prefix="caudal-nginx-")
        self.port = port
        with open(os.path.join(self.dir, "site.conf"), "w") as f:
            f.write(site)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(MAIN_CONF.format(dir=self.dir))
        self.site = site
        self.proc = subprocess.Popen([NGINX, "-p", self.dir, "-c", conf, "-e",
                                      os.path.join(self.dir, "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            self._wait_listening()
        except AssertionError:
            self.close()
            raise

    def _wait_listening(self):
        def up():
            if self.proc.poll() is not None:
                raise AssertionError("nginx exited:\n" + self.log())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            except OSError:
                return False
        wait_until(up, "nginx to listen")

    def log(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
