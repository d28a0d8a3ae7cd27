"""The .deb as an administrator meets it: what it declares and holds, and what installing,
running, disabling, reinstalling, removing and purging it does, in a throwaway root.

The root is a directory this test makes (dpkg --root, maintainer scripts run chrootless with
DPKG_ROOT set, as Debian's tools do for an image being built): its dpkg database holds this
machine's entries for the packages caudal depends on, so dpkg itself checks the declared
dependencies against what is installed here; it has Debian 12's merged /usr and a copy of this
machine's systemd units, so `systemd-analyze verify` can resolve the unit's targets. Nothing is
installed on the machine itself, and the lifecycle test checks that nothing of caudal appears
there."""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

WORK = os.environ["CAUDAL_PACKAGE_WORK"]
VERSION = os.environ["CAUDAL_VERSION"]
CAUDAL_BIN = os.environ["CAUDAL_BIN"]
UNIT = "caudal.service"
WANTS_LINK = "etc/systemd/system/multi-user.target.wants/" + UNIT
# The exposure `systemd-analyze security` gives the unit (0 best, 10 worst); 1.4 when written.
MAX_EXPOSURE = 2.0

# The package's files and their modes; directories are checked apart.
EXPECTED_FILES = {
    "usr/bin/caudal": "-rwxr-xr-x",
    "usr/lib/caudal/caudal.so": "-rwxr-xr-x",  # Redis 7 loads no module without execute permission
    "lib/systemd/system/caudal.service": "-rw-r--r--",
    "etc/caudal/caudal.yaml": "-rw-r--r--",
    "etc/default/caudal": "-rw-------",
    "usr/share/doc/caudal/copyright": "-rw-r--r--",
    "usr/share/doc/caudal/changelog.Debian.gz": "-rw-r--r--",
    "usr/share/doc/caudal/README.md": "-rw-r--r--",
    "usr/share/doc/caudal/docs/operations.md": "-rw-r--r--",
    "usr/share/doc/caudal/docs/configuration.md": "-rw-r--r--",
    "usr/share/man/man1/caudal.1.gz": "-rw-r--r--",
    "usr/share/lintian/overrides/caudal": "-rw-r--r--",
}
# Where the package may put anything at all.
ALLOWED_PREFIXES = ("usr/bin/caudal", "usr/lib/caudal/caudal.so", "lib/systemd/system/caudal.service", "etc/caudal/",
                    "etc/default/caudal", "usr/share/doc/caudal/", "usr/share/man/man1/caudal.1.gz",
                    "usr/share/lintian/overrides/caudal")
HOST_PATHS = ["/usr/bin/caudal", "/lib/systemd/system/caudal.service",
              "/usr/lib/systemd/system/caudal.service", "/etc/caudal", "/etc/default/caudal",
              "/" + WANTS_LINK, "/var/lib/systemd/deb-systemd-helper-enabled/" + UNIT + ".dsh-also",
              "/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/" + UNIT]


def read(path):
    with open(path) as f:
        return f.read()


def run(args, **kwargs):
    """Runs a command, failing the test with its output unless it exits 0."""
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, **kwargs)
    if p.returncode != 0:
        raise AssertionError("%s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout,
                                                      p.stderr))
    return p


def the_deb():
    debs = glob.glob(os.path.join(WORK, "caudal_*.deb"))
    if len(debs) != 1:
        raise AssertionError("expected one caudal_*.deb in %s, found %s" % (WORK, debs))
    return debs[0]


def field(deb, name):
    return run(["dpkg-deb", "-f", deb, name]).stdout.strip()


def depended_packages(deb):
    """The package names in Depends (every alternative), versions dropped."""
    names = []
    for item in field(deb, "Depends").split(","):
        for alternative in item.split("|"):
            names.append(re.sub(r"\s*\(.*\)", "", alternative).strip().split(":")[0])
    return names


def host_packages_of(paths):
    """The Debian package that installed each of `paths` on this machine (either spelling of a
    merged-/usr path), without its architecture; one dpkg -S for all."""
    def spellings(path):
        return [path, path[len("/usr"):] if path.startswith("/usr/") else "/usr" + path]
    p = subprocess.run(["dpkg", "-S"] + [s for path in paths for s in spellings(path)],
                       capture_output=True, text=True)
    owner = {}
    for line in p.stdout.splitlines():
        if line.startswith("diversion by "):
            continue
        packages, path = line.split(": ", 1)
        owner[path] = packages.split(",")[0].split(":")[0].strip()
    found = {}
    for path in paths:
        for spelling in spellings(path):
            if spelling in owner:
                found[path] = owner[spelling]
        if path not in found:
            raise AssertionError("no package on this machine owns " + path)
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(root, skip=("var/lib/dpkg", "var/log")):
    """Every path under `root` (relative), except dpkg's own records."""
    paths = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if os.path.normpath(os.path.join(rel, x)) not in skip]
        for name in dirs + files:
            paths.add(os.path.normpath(os.path.join(rel, name)))
    return paths


def host_state():
    """What this machine has at the paths caudal would occupy, and dpkg's view of caudal."""
    state = {p: (os.path.lexists(p), os.path.realpath(p)) for p in HOST_PATHS}
    q = subprocess.run(["dpkg-query", "-W", "-f=${Status} ${Version}", "caudal"],
                       capture_output=True, text=True)
    state["dpkg"] = (q.returncode, q.stdout)
    return state


class ThrowawayRoot:
    """A directory dpkg installs into as if it were a Debian 12 system (see the module's doc)."""

    def __init__(self, deb):
        self.deb = deb
        self.path = tempfile.mkdtemp(prefix="root-", dir=WORK)
        os.makedirs(self.admin + "/info")
        os.makedirs(self.admin + "/updates")
        os.makedirs(os.path.join(self.path, "var/log"))
        for d in ("bin", "lib", "sbin"):  # merged /usr
            os.makedirs(os.path.join(self.path, "usr", d))
            os.symlink("usr/" + d, os.path.join(self.path, d))
        for d in ("etc/default", "etc/systemd/system", "var/lib/systemd", "usr/share/doc",
                  "usr/share/man/man1"):
            os.makedirs(os.path.join(self.path, d))
        shutil.copytree("/usr/lib/systemd/system", self.file("usr/lib/systemd/system"),
                        symlinks=True)
        shutil.copy2("/bin/kill", self.file("usr/bin/kill"))  # the unit's ExecReload
        with open(self.admin + "/status", "w") as status:
            # The skeleton's directories belong to a package, as on any Debian system, so that
            # dpkg does not delete them when the last of caudal's files leaves one.
            status.write(run(["dpkg-query", "-s", "base-files"]).stdout.rstrip("\n") + "\n\n")
            with open(self.admin + "/info/base-files.list", "w") as skeleton:
                skeleton.write("/.\n")
                for path in sorted(tree(self.path)):
                    if os.path.isdir(self.file(path)) and not os.path.islink(self.file(path)):
                        skeleton.write("/%s\n" % path)
            for name in dict.fromkeys(depended_packages(deb)):
                q = subprocess.run(["dpkg-query", "-s", name], capture_output=True, text=True)
                if q.returncode != 0:
                    continue  # dpkg will refuse the package, naming what is missing
                status.write(q.stdout.rstrip("\n") + "\n\n")
                arch_name = run(["dpkg-query", "-W", "-f=${binary:Package}\n", name]).stdout
                for n in arch_name.split():
                    open("%s/info/%s.list" % (self.admin, n), "w").close()

    @property
    def admin(self):
        return os.path.join(self.path, "var/lib/dpkg")

    def file(self, rel):
        return os.path.join(self.path, rel)

    def dpkg(self, *args):
        wrap, force = [], []
        if os.geteuid() != 0:
            wrap, force = ["fakeroot"], ["--force-not-root"]
        return run(wrap + ["dpkg", "--root=" + self.path, "--log=" + self.file("var/log/dpkg.log"),
                           "--force-script-chrootless"] + force + list(args))

    def status(self):
        q = subprocess.run(["dpkg-query", "--admindir=" + self.admin, "-W",
                            "-f=${db:Status-Abbrev}", "caudal"], capture_output=True, text=True)
        return q.stdout.strip() if q.returncode == 0 else "absent"

    def close(self):
        shutil.rmtree(self.path, ignore_errors=True)


class Contents(unittest.TestCase):
    """What the .deb declares and holds, read with dpkg-deb."""

    @classmethod
    def setUpClass(cls):
        cls.deb = the_deb()

    def test_control_fields(self):
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        self.assertEqual(os.path.basename(self.deb), "caudal_%s-1_%s.deb" % (VERSION, arch))
        self.assertEqual(field(self.deb, "Package"), "caudal")
        self.assertEqual(field(self.deb, "Version"), VERSION + "-1")
        self.assertEqual(field(self.deb, "Architecture"), arch)
        self.assertEqual(field(self.deb, "Section"), "net")
        self.assertRegex(field(self.deb, "Maintainer"), r"^[^<>]+ <[^<>@]+@[^<>@]+>$")
        self.assertTrue(field(self.deb, "Description").startswith("distributed rate limiter"))

    def test_depends_names_the_package_of_every_library_the_binary_needs(self):
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                            run(["readelf", "-d", CAUDAL_BIN]).stdout)
        self.assertIn("libc.so.6", needed)
        resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", run(["ldd", CAUDAL_BIN]).stdout, re.M))
        depends = depended_packages(self.deb)
        owners = host_packages_of([resolved[soname] for soname in needed])
        for soname in needed:
            package = owners[resolved[soname]]
            self.assertIn(package, depends, "%s (from %s) is not in Depends" % (package, soname))
        self.assertIn("procps", depends)  # the unit's ExecReload runs /bin/kill

    def test_files_modes_and_owners(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout.splitlines()
        entries = {}
        for line in listing:
            mode, owner, _size, _date, _time, path = line.split(None, 5)
            path = path.split(" -> ")[0].lstrip("./").rstrip("/")
            entries[path] = mode
            self.assertEqual(owner, "root/root", line)
            if mode.startswith("d"):
                self.assertEqual(mode, "drwxr-xr-x", line)
            else:
                self.assertTrue(path.startswith(ALLOWED_PREFIXES), "unexpected file: " + line)
        for path, mode in EXPECTED_FILES.items():
            self.assertEqual(entries.get(path), mode, path)
        # The dev component (headers, static libraries, the CMake package) is not in it.
        self.assertFalse([p for p in entries if p.endswith(".a") or "/include/" in p
                          or "/cmake/" in p])

    def test_binary_is_stripped_and_bound_now(self):
        with tempfile.TemporaryDirectory(dir=WORK) as d:
            run(["dpkg-deb", "-x", self.deb, d])
            binary = os.path.join(d, "usr/bin/caudal")
            sections = run(["readelf", "-S", "-W", binary]).stdout
            self.assertNotIn(".symtab", sections)
            self.assertRegex(run(["readelf", "-d", binary]).stdout, r"FLAGS_1.*\bNOW\b.*\bPIE\b")

    def test_conffiles_and_maintainer_scripts(self):
        conffiles = run(["dpkg-deb", "-I", self.deb, "conffiles"]).stdout.split()
        self.assertEqual(conffiles, ["/etc/caudal/caudal.yaml", "/etc/default/caudal"])
        with tempfile.TemporaryDirectory(dir=WORK) as d:
            run(["dpkg-deb", "-e", self.deb, d])
            for script in ("postinst", "prerm", "postrm"):
                path = os.path.join(d, script)
                self.assertEqual(os.stat(path).st_mode & 0o777, 0o755, script)
                run(["sh", "-n", path])


class Installed(unittest.TestCase):
    """The package installed in a throwaway root: its binary, config and unit."""

    @classmethod
    def setUpClass(cls):
        cls.root = ThrowawayRoot(the_deb())
        cls.root.dpkg("--install", cls.root.deb)

    @classmethod
    def tearDownClass(cls):
        cls.root.close()

    def caudal(self, *args):
        return run([self.root.file("usr/bin/caudal")] + list(args))

    def test_installed_and_enabled(self):
        self.assertEqual(self.root.status(), "ii")
        self.assertEqual(os.readlink(self.root.file(WANTS_LINK)), "/lib/systemd/system/" + UNIT)
        self.assertEqual(os.stat(self.root.file("etc/default/caudal")).st_mode & 0o777, 0o600)

    def test_version_and_help(self):
        self.assertEqual(self.caudal("--version").stdout, "caudal %s\n" % VERSION)
        self.assertIn("validate", self.caudal("--help").stdout)

    def test_redis_loads_the_module(self):
        # A real redis-server loads the packaged module, which names this build's protocol.
        port = free_port()
        with tempfile.TemporaryDirectory(dir=WORK) as d:
            server = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--dir", d, "--loadmodule", self.root.file("usr/lib/caudal/caudal.so")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                answer = ""
                for _ in range(100):
                    p = subprocess.run(["redis-cli", "-p", str(port), "CAUDAL.PROTOCOL"],
                                       capture_output=True, text=True)
                    answer = p.stdout.strip()
                    if p.returncode == 0 and answer:
                        break
                    time.sleep(0.05)
                self.assertRegex(answer, r"^caudal_consume_[0-9a-f]{16}$")
            finally:
                server.terminate()
                server.wait()

    def test_default_config_is_valid_and_decides(self):
        config = self.root.file("etc/caudal/caudal.yaml")
        out = self.caudal("validate", "--config", config).stdout
        self.assertIn("valid (1 policies: per-api-key; store memory://", out)
        check = self.caudal("check", "--config", config, "--descriptor", "api_key=k1")
        self.assertIn('"allowed":true', check.stdout)

    def test_unit_verifies(self):
        p = run(["systemd-analyze", "verify", "--root=" + self.root.path, UNIT])
        self.assertEqual(p.stdout + p.stderr, "", "systemd-analyze verify complained")

    def test_unit_exposure(self):
        p = run(["systemd-analyze", "security", "--offline=yes", "--root=" + self.root.path,
                 "--no-pager", UNIT])
        m = re.search(r"Overall exposure level for caudal\.service: ([0-9.]+)", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        print("\nsystemd-analyze security: exposure %s (0 best, 10 worst)" % m.group(1))
        self.assertLessEqual(float(m.group(1)), MAX_EXPOSURE, p.stdout)

    def test_unit_command_lines_serve_reload_and_stop(self):
        """ExecStart as systemd would run it (EnvironmentFile read, paths in the root), then
        ExecReload's signal, then the stop signal; systemd itself does not run here."""
        unit = read(self.root.file("lib/systemd/system/" + UNIT))
        exec_start = re.search(r"^ExecStart=(.+)$", unit, re.M).group(1).split()
        self.assertRegex(unit, r"(?m)^ExecReload=/bin/kill -HUP \$MAINPID$")
        self.assertRegex(unit, r"(?m)^EnvironmentFile=-/etc/default/caudal$")
        port = free_port()
        env_file = self.root.file("etc/default/caudal")
        with open(env_file, "a") as f:
            f.write("CAUDAL_HTTP=127.0.0.1:%d\n" % port)
        env = {"PATH": os.environ["PATH"]}
        for line in read(env_file).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, value = line.split("=", 1)
                env[key] = value
        argv = [self.root.file(a[1:]) if a.startswith("/") else a for a in exec_start]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            base = "http://127.0.0.1:%d" % port
            self.wait_for(lambda: self.get(base + "/healthz") == 200, proc)
            request = urllib.request.Request(base + "/v1/check", method="POST",
                                             data=b'{"descriptors": {"api_key": "k1"}}')
            with urllib.request.urlopen(request, timeout=5) as r:
                self.assertEqual(r.status, 200)
                self.assertEqual(r.headers["RateLimit-Policy"], '"per-api-key";q=100;w=60')
            proc.send_signal(signal.SIGHUP)
            reloads = 'caudal_config_reloads_total{result="success"} 1'
            self.wait_for(lambda: reloads in self.metrics(base), proc)
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=10), 0)  # a clean stop, not a failure to restart
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()

    @staticmethod
    def get(url):
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status
        except OSError:
            return None

    @staticmethod
    def metrics(base):
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            return r.read().decode()

    def wait_for(self, predicate, proc):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.fail("caudal exited %d: %s" % (proc.returncode, proc.stderr.read()))
            if predicate():
                return
            time.sleep(0.02)
        self.fail("timed out")


class Lifecycle(unittest.TestCase):
    """Install, change the config, disable, reinstall, remove, purge: what Debian promises an
    administrator, and nothing left behind, in the root or on this machine."""

    def setUp(self):
        self.host_before = host_state()
        self.root = ThrowawayRoot(the_deb())
        self.addCleanup(self.root.close)
        self.before = tree(self.root.path)

    def test_lifecycle(self):
        r = self.root
        r.dpkg("--install", r.deb)
        self.assertEqual(r.status(), "ii")
        self.assertTrue(os.path.islink(r.file(WANTS_LINK)))

        # The administrator edits the config and disables the unit (offline, as systemctl does).
        config = r.file("etc/caudal/caudal.yaml")
        edited = read(config).replace("capacity: 100, refill: 100/1m",
                                             "capacity: 5, refill: 5/1m")
        with open(config, "w") as f:
            f.write(edited)
        run(["systemctl", "--root=" + r.path, "disable", UNIT])
        self.assertFalse(os.path.lexists(r.file(WANTS_LINK)))

        # Reinstalling (an upgrade's path through postinst) keeps both choices, without a prompt.
        r.dpkg("--install", r.deb)
        self.assertEqual(r.status(), "ii")
        self.assertEqual(read(config), edited)
        self.assertFalse(os.path.lexists(r.file(WANTS_LINK)), "postinst enabled it again")

        # Enabled again, then removed: the program goes, the conffiles stay.
        run(["systemctl", "--root=" + r.path, "enable", UNIT])
        r.dpkg("--remove", "caudal")
        self.assertEqual(r.status(), "rc")
        self.assertFalse(os.path.lexists(r.file("usr/bin/caudal")))
        self.assertFalse(os.path.lexists(r.file("lib/systemd/system/" + UNIT)))
        self.assertEqual(read(config), edited)

        # Purged: nothing of caudal anywhere in the root.
        r.dpkg("--purge", "caudal")
        self.assertEqual(r.status(), "absent")
        self.assertEqual(sorted(tree(r.path) - self.before), [])
        self.assertEqual(sorted(self.before - tree(r.path)), [])
        self.assertEqual(host_state(), self.host_before, "the machine itself changed")


if __name__ == "__main__":
    unittest.main()
