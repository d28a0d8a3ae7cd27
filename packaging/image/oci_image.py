#!/usr/bin/env python3
"""Writes an OCI image archive (an OCI image layout in a tar, as `podman save --format
oci-archive` writes) from a root filesystem tarball: one layer, the image config, the manifest.
Deterministic: every time in it is SOURCE_DATE_EPOCH, so the same rootfs gives the same digest.
Also lists the Debian packages in the rootfs's dpkg database (the SBOM)."""
import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile

# The program itself, so the arguments a container is given are caudal's: a command (`validate
# --config FILE`, `--help`), or flags alone, which caudal takes as serve's. None: serve. Serve's
# config and log format default from the environment, which a run's flags or -e override.
ENTRYPOINT = ["/usr/bin/caudal"]
CMD = ["serve"]
ENV = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CAUDAL_CONFIG=/etc/caudal/caudal.yaml",
       "CAUDAL_LOG_FORMAT=json"]
USER = "10001:10001"
PORTS = {"8080/tcp": {}, "8081/tcp": {}}
# Left to the runtime, which mounts its own (and device nodes do not belong in a layer).
SKIPPED = ("./dev/", "./proc/", "./sys/")
# mmdebstrap's working files, apt's and dpkg's configuration (neither runs in the image), and
# what the runtime provides.
DROPPED = ("./etc/apt/", "./etc/dpkg/", "./var/cache/apt/", "./var/lib/apt/", "./var/log/",
           "./var/lib/dpkg/info/", "./var/lib/dpkg/triggers/", "./var/lib/dpkg/updates/",
           "./var/lib/dpkg/alternatives/", "./etc/hostname/", "./etc/resolv.conf/", "./etc/fstab/")


def layer(rootfs, epoch):
    """The rootfs as a normalized tar, gzipped: (compressed bytes, diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(rootfs) as src, tarfile.open(fileobj=raw, mode="w",
                                                  format=tarfile.PAX_FORMAT) as dst:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        for m in members:
            if (m.name + "/").startswith(SKIPPED + DROPPED) or m.ischr() or m.isblk():
                continue
            m.mtime = min(m.mtime, epoch)
            m.uname = m.gname = ""
            m.pax_headers = {}
            dst.addfile(m, src.extractfile(m) if m.isreg() else None)
        for d in SKIPPED:  # the mount points themselves
            info = tarfile.TarInfo(d.rstrip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            dst.addfile(info)
    data = raw.getvalue()
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, compresslevel=9) as z:
        z.write(data)
    return packed.getvalue(), "sha256:" + hashlib.sha256(data).hexdigest()


def packages(rootfs):
    """(name, version) of each package in the rootfs's /var/lib/dpkg/status."""
    with tarfile.open(rootfs) as src:
        status = src.extractfile("./var/lib/dpkg/status").read().decode()
    out = []
    for stanza in status.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        out.append((fields["Package"], fields["Version"]))
    return sorted(out)


def blob(entries, data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    entries["blobs/sha256/" + digest.split(":")[1]] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rootfs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--packages", required=True)
    args = p.parse_args()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = __import__("time").strftime("%Y-%m-%dT%H:%M:%SZ", __import__("time").gmtime(epoch))

    pkgs = packages(args.rootfs)
    with open(args.packages, "w") as f:
        f.writelines("%s %s\n" % p for p in pkgs)

    entries = {}
    compressed, diff_id = layer(args.rootfs, epoch)
    layer_desc = blob(entries, compressed, "application/vnd.oci.image.layer.v1.tar+gzip")
    labels = {
        "org.opencontainers.image.title": "caudal",
        "org.opencontainers.image.description": "caudal, a distributed rate limiter",
        "org.opencontainers.image.version": args.version,
        "org.opencontainers.image.base.name": "debian:bookworm (mmdebstrap, extract)",
    }
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {"User": USER, "Entrypoint": ENTRYPOINT, "Cmd": CMD,
                   "Env": ENV, "ExposedPorts": PORTS,
                   "WorkingDir": "/", "StopSignal": "SIGTERM", "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created,
                     "created_by": "packaging/image/build-image: %d Debian packages" % len(pkgs)}],
    }
    config_desc = blob(entries, json.dumps(config, sort_keys=True).encode(),
                       "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc], "annotations": labels}
    manifest_desc = blob(entries, json.dumps(manifest, sort_keys=True).encode(),
                         "application/vnd.oci.image.manifest.v1+json")
    # podman names the loaded image after ref.name, Docker after containerd's annotation.
    name = "caudal:" + args.version
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": name,
                                    "io.containerd.image.name": name}
    entries["oci-layout"] = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
    entries["index.json"] = json.dumps({"schemaVersion": 2,
                                        "mediaType": "application/vnd.oci.image.index.v1+json",
                                        "manifests": [manifest_desc]}, sort_keys=True).encode()
    tmp = args.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as archive:
        for name in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(entries[name]), epoch, 0o644
            archive.addfile(info, io.BytesIO(entries[name]))
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
