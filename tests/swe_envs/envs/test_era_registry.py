"""Era-correct toolchain choice and the host's registry access, without Docker.

Repositories are real git repos made here; the registry settings are read from config files
written in tmp (the way pip finds them), never from a host name in the test.
"""

from __future__ import annotations

import pytest

from core.errors import UserError
from swe_envs.config import SweEnvsConfig
from swe_envs.envs import era
from swe_envs.images import toolchain_dockerfile
from swe_envs.registry import IMAGE_BUNDLE, find_ca_bundle, host_access, pip_config
from swe_envs.repos import Snapshot
from tests.swe_envs.envs.regen_fixtures import make_git

PY = SweEnvsConfig().toolchain("python")


def _choose(tmp_path, files, created_at=None, exclude=None, language="python"):
    repo, head = make_git(tmp_path, files)
    tc = SweEnvsConfig().toolchain(language)
    return era.choose(language, Snapshot(repo, head), tc.versions, tc.base_image, created_at, exclude)


@pytest.mark.parametrize("created_at,files,version", [
    (["2019-05-14T21:54:55Z"], {"setup.py": "setup(python_requires='>=3.5')"}, "3.9"),   # older than every version
    (["2022-06-15T17:39:53Z", "2022-10-08T06:20:42Z"], {"setup.py": ""}, "3.9"),        # 3.11 came out 2022-10-24
    (["2023-03-04T18:36:21Z"], {"pyproject.toml": "requires-python = '>=3.7'"}, "3.11"),
    (["2025-06-01T00:00:00Z"], {"x.py": ""}, "3.13"),
    # declared support caps the era: classifiers up to 3.11
    (["2025-06-01T00:00:00Z"], {"setup.cfg": "classifiers =\n  Programming Language :: Python :: 3.10\n"
                                             "  Programming Language :: Python :: 3.11\n"}, "3.11"),
    (["2025-06-01T00:00:00Z"], {"tox.ini": "[tox]\nenvlist = py38,py39\n"}, "3.9"),
    (["2025-06-01T00:00:00Z"], {".github/workflows/ci.yml": "python-version: ['3.8', '3.9', '3.10']\n"}, "3.9"),
])
def test_python_by_era_and_declared_support(tmp_path, created_at, files, version):
    choice = _choose(tmp_path, files, created_at)
    assert choice.version == version, choice.evidence
    assert choice.base_image == PY.versions[version]
    assert choice.evidence["date_source"] == "created_at" and choice.era_date == max(created_at)[:10]


def test_commit_date_without_instances_and_refinement_to_older(tmp_path):
    choice = _choose(tmp_path, {"x.py": ""})
    assert choice.evidence["date_source"] == "commit date" and choice.version == "3.13"
    older = _choose(tmp_path / "b", {"x.py": ""}, exclude={"3.11", "3.13"})
    assert older.version == "3.9" and older.evidence["excluded"] == ["3.11", "3.13"]
    log = "E   ImportError: cannot import name 'Mapping' from 'collections' (/usr/lib/python3.11/collections/__init__.py)"
    assert era.older_wanted(log) and era.older_wanted("ModuleNotFoundError: No module named 'distutils'")
    assert era.older_wanted("ModuleNotFoundError: No module named 'yaml'") is None


def test_compiled_languages_follow_declared_minimums(tmp_path):
    assert _choose(tmp_path / "g", {"go.mod": "module m\n\ngo 1.21\n"}, language="go").version == "1.24"
    assert _choose(tmp_path / "r", {"Cargo.toml": "[package]\nedition = '2021'\n"}, ["2023-01-01"],
                   language="rust").version == "1.63"
    # no evidence: the configured default image, whatever the date
    plain = _choose(tmp_path / "c", {"Cargo.toml": "[package]\nname = 'x'\n"}, ["2020-01-01"], language="rust")
    assert plain.version == "1.63" and plain.base_image == "local/debian:bookworm"
    c = _choose(tmp_path / "n", {"a.c": ""}, language="c")
    assert c.version is None and c.base_image == "local/debian:bookworm"


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
