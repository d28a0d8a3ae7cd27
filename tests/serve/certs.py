"""Certificates for the TLS tests, made with the openssl command line in a directory: a CA, a
server certificate (127.0.0.1, ::1, localhost and any extra names), client certificates with a
chosen CN and SANs, and everything again under a second CA that nobody trusts."""
import os
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


class Authority:
    """A CA in `directory` whose files are named after `name` (name.pem, name.key)."""

    def __init__(self, directory, name="ca", common_name="caudal test CA"):
        self.dir = directory
        self.name = name
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-nodes", "-days", "2", "-subj", "/CN=" + common_name,
                 "-keyout", name + ".key", "-out", name + ".pem",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
        self.cert = os.path.join(directory, name + ".pem")
        self.key = os.path.join(directory, name + ".key")

    def issue(self, name, common_name, sans=(), server=False):
        """name.pem and name.key signed by this CA; `sans` like ["DNS:x", "URI:spiffe://..."].
        Returns (cert path, key path)."""
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth" if server else "clientAuth"))
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(sans))
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-subj", "/CN=" + common_name, "-keyout", name + ".key", "-out", name + ".csr",
                 cwd=self.dir)
        _openssl("x509", "-req", "-in", name + ".csr", "-CA", self.cert, "-CAkey", self.key,
                 "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", name + ".pem",
                 cwd=self.dir)
        return os.path.join(self.dir, name + ".pem"), os.path.join(self.dir, name + ".key")

    def server(self, name="server", extra_sans=()):
        return self.issue(name, "localhost", ["DNS:localhost", "IP:127.0.0.1", "IP:::1"] +
                          list(extra_sans), server=True)
