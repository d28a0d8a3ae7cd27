"""A network namespace joined to this one by a veth pair, for fault tests (root only).

    with Namespace() as ns:           # 10.254.N.1 here, 10.254.N.2 inside, a /30 of our own
        ns.spawn(["redis-server", ...]) # a process inside it
        ns.loss(20)                     # drop 20% of the packets entering and leaving it
        ns.blackhole()                  # drop them all: a silent partition
        ns.heal()
        ns.link(False)                  # the link down: a partition the kernel reports

Packet rules live in the namespace's own nftables, so the host's firewall is never touched, and
everything (processes, rules, links, the namespace) goes when the test ends, failed or not.
Creating a namespace that fails is an error, never a skip."""
import os
import random
import subprocess


def run(args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


class Namespace:
    def __init__(self):
        if os.geteuid() != 0:
            raise AssertionError("network namespace tests need root (CI runs as root)")
        tag = "%05d%02d" % (os.getpid() % 100000, random.randrange(100))
        self.name = "caudal-" + tag
        self.host_if = "cdl%sh" % tag  # interface names: at most 15 characters
        self.ns_if = "cdl%sn" % tag
        self.subnet = self._free_subnet()
        self.host_ip = "10.254.%d.1" % self.subnet
        self.ip = "10.254.%d.2" % self.subnet
        self.procs = []
        self._created = False
        try:
            self._create()
        except (subprocess.CalledProcessError, OSError) as e:
            self.close()
            detail = getattr(e, "stderr", "") or str(e)
            raise AssertionError("cannot create a network namespace with a veth pair: %s" % detail)

    @staticmethod
    def _free_subnet():
        used = run(["ip", "-o", "-4", "addr", "show"]).stdout
        for _ in range(100):
            n = random.randrange(1, 255)
            if " 10.254.%d." % n not in used:
                return n
        raise AssertionError("no free 10.254.N.0/30 for a test namespace")

    def _create(self):
        run(["ip", "netns", "add", self.name])
        self._created = True
        run(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if])
        run(["ip", "link", "set", self.ns_if, "netns", self.name])
        run(["ip", "addr", "add", self.host_ip + "/30", "dev", self.host_if])
        run(["ip", "link", "set", self.host_if, "up"])
        self.exec(["ip", "addr", "add", self.ip + "/30", "dev", self.ns_if])
        self.exec(["ip", "link", "set", self.ns_if, "up"])
        self.exec(["ip", "link", "set", "lo", "up"])
        self.heal()

    def exec(self, args, check=True):
        return run(["ip", "netns", "exec", self.name] + args, check=check)

    def wrap(self):
        """The command prefix that runs a program inside the namespace."""
        return ["ip", "netns", "exec", self.name]

    def _rules(self, verdict):
        """`verdict` for every packet that enters or leaves through the veth ("" for none)."""
        ruleset = ("flush ruleset\n"
                   "table inet fault {\n"
                   "  chain in { type filter hook input priority 0; policy accept;\n"
                   "    %s\n  }\n"
                   "  chain out { type filter hook output priority 0; policy accept;\n"
                   "    %s\n  }\n"
                   "}\n") % (('iifname "%s" %s' % (self.ns_if, verdict)) if verdict else "",
                              ('oifname "%s" %s' % (self.ns_if, verdict)) if verdict else "")
        subprocess.run(self.wrap() + ["nft", "-f", "-"], input=ruleset, text=True, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def loss(self, percent):
        """Drops `percent`% of the packets crossing the veth, each way, at random."""
        self._rules("numgen random mod 100 < %d drop" % percent)

    def blackhole(self):
        """Drops every packet crossing the veth: the peer neither answers nor refuses."""
        self._rules("drop")

    def heal(self):
        self._rules("")

    def link(self, up):
        run(["ip", "link", "set", self.host_if, "up" if up else "down"])

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs = []
        run(["ip", "link", "del", self.host_if], check=False)
        if self._created:
            run(["ip", "netns", "del", self.name], check=False)
            self._created = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
