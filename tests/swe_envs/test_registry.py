"""The host's registry access handed to image builds, without Docker: the settings are read from
config files written in tmp (the way pip finds them), never from a host name in the test."""

from __future__ import annotations

import pytest

from core.errors import UserError
from swe_envs.config import SweEnvsConfig
from swe_envs.images import toolchain_dockerfile
from swe_envs.registry import IMAGE_BUNDLE, find_ca_bundle, host_access, pip_config

PY = SweEnvsConfig().toolchain("python")


def test_ca_bundle_lookup(tmp_path):
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    assert find_ca_bundle(None, {"SSL_CERT_FILE": str(bundle)}) == str(bundle)
    assert find_ca_bundle(None, {"PIP_CONFIG_FILE": str(tmp_path / "none.conf"), "PIP_CERT": str(bundle)}) == str(bundle)
    assert find_ca_bundle("", {}) is None
    with pytest.raises(UserError, match="build.ca_bundle"):
        find_ca_bundle(str(tmp_path / "missing.pem"), {})


def test_host_index_settings_come_from_pip_config(tmp_path, monkeypatch):
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.invalid/simple\n"
                    "extra-index-url = file:///opt/wheels/simple https://extra.invalid/simple\n"
                    f"cert = {bundle}\ntrusted-host = mirror.invalid\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(var, raising=False)
    assert pip_config()["cert"] == str(bundle)
    acc = host_access(None)
    assert acc.ca_source == str(bundle) and acc.ca_bundle == bundle.read_bytes()
    assert acc.env["PIP_INDEX_URL"] == acc.env["UV_INDEX_URL"] == "https://mirror.invalid/simple"
    # a file:// index is a path on the host: left out, and said so
    assert acc.env["PIP_EXTRA_INDEX_URL"] == acc.env["UV_EXTRA_INDEX_URL"] == "https://extra.invalid/simple"
    assert any("file:///opt/wheels/simple" in s for s in acc.skipped)
    assert acc.env["SSL_CERT_FILE"] == acc.env["PIP_CERT"] == acc.env["NODE_EXTRA_CA_CERTS"] == IMAGE_BUNDLE
    lines = toolchain_dockerfile(PY, acc, "local/debian:bullseye").splitlines()
    assert lines[0] == "FROM local/debian:bullseye"
    # trust and index settings come before the first package-index access (uv in `setup`)
    ca = lines.index("RUN update-ca-certificates >/dev/null")
    assert ca < next(i for i, line in enumerate(lines) if "pip install" in line)
    assert acc.context()["swe-host/ca.crt"] == bundle.read_bytes()
    assert acc.record()["ca_bundle"] == str(bundle) and "PIP_INDEX_URL" in acc.record()["env"]
    assert host_access("", index_settings=False).record() == {"ca_bundle": None, "ca_bytes": 0, "env": [],
                                                               "files": [], "skipped": []}
