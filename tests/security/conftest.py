"""Certificates made with the openssl CLI at test time, shared by the TLS tests of this directory."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from external import require


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    require(shutil.which("openssl") is not None, "the openssl CLI is not installed")
    d = tmp_path_factory.mktemp("certs")
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
