"""A test CA, a broker certificate for 127.0.0.1/localhost, a client certificate and a rogue one,
made with the openssl CLI: shared by the TLS tests and the security benchmark."""
from __future__ import annotations

import subprocess
from pathlib import Path


def openssl(*args, cwd) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path) -> Path:
    """Write ca.pem, broker-keystore.pem (certificate + key), alice.pem/.key and rogue.pem/.key into `d`."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=kafka-edu test CA", cwd=d)
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, subject, ext in (("broker", "/CN=localhost", ["-extfile", "san.ext"]),
                               ("alice", "/O=kafka-edu/CN=alice", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", subject, cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *ext, cwd=d)
    (d / "broker-keystore.pem").write_text((d / "broker.pem").read_text() + (d / "broker.key").read_text())
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key", "-out", "rogue.pem",
            "-days", "2", "-subj", "/CN=rogue", cwd=d)
    return d
