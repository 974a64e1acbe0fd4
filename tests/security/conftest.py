"""Certificates made with the openssl CLI at test time, shared by the TLS tests of this directory."""
from __future__ import annotations

import shutil

import pytest
from _certs import make_certs
from external import require


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    require(shutil.which("openssl") is not None, "the openssl CLI is not installed")
    return make_certs(tmp_path_factory.mktemp("certs"))
