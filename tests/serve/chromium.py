"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
(--remote-debugging-pipe): no port, no extra Python package. One browser per instance, a
temporary profile, killed when closed."""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class Chromium:
    def __init__(self, width=1200, height=1400):
        self.profile = tempfile.mkdtemp(prefix="caudal-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._resp_r, resp_w = os.pipe()

        def child():  # the browser reads commands on fd 3 and answers on fd 4
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(resp_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [CHROMIUM, "--headless", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--user-data-dir=" + self.profile, "--remote-debugging-pipe",
                "--window-size=%d,%d" % (width, height), "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run its sandbox as root
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=child, pass_fds=(3, 4))
        os.close(cmd_r)
        os.close(resp_w)
        self._next_id = 0
        self._buffer = b""
        self.session = None

    def call(self, method, params=None, session=True, timeout_s=30):
        """Sends one command (to the page's session once attached); its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise AssertionError("%s: %s" % (method, reply["error"]))
                    return reply["result"]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._resp_r], [], [], left)[0]:
                raise AssertionError("chromium did not answer " + method)
            chunk = os.read(self._resp_r, 1 << 20)
            if not chunk:
                raise AssertionError("chromium exited")
            self._buffer += chunk

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True}, session=False)["sessionId"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise AssertionError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout_s=45):
        """Polls `expression` in the page until it is truthy (an exception, while the page is
        still loading, counts as not yet); its value."""
        guarded = "(() => { try { return (%s); } catch (e) { return null; } })()" % expression
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(guarded)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError("timed out waiting for " + what)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))

    def close(self):
        try:
            os.close(self._cmd_w)
            os.close(self._resp_r)
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
