"""Reliability suites: an ``area("…")`` marker names the table row a test feeds; a failing test is
an escape for its area. With RELIABILITY_TABLE=PATH the run ends by printing the table and
writing it (JSON, plus a Markdown copy beside it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.ledger import LEDGER


def pytest_configure(config):
    config.addinivalue_line("markers", "area(name): the reliability-table row this test feeds")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("area")
    if marker is not None and report.failed and call.when == "call":
        LEDGER.add(marker.args[0], escapes=1)


def pytest_terminal_summary(terminalreporter):
    target = os.environ.get("RELIABILITY_TABLE")
    if not target or not LEDGER.rows:
        return
    path = Path(target)
    LEDGER.write(path)
    path.with_suffix(".md").write_text(LEDGER.markdown() + "\n")
    terminalreporter.write_sep("=", "reliability")
    terminalreporter.write_line(LEDGER.table())
    terminalreporter.write_line(f"(written to {path} and {path.with_suffix('.md')})")


@pytest.fixture(scope="session")
def docker_engine():
    """A real engine with the offline base image (installed and started by ensure_docker when absent)."""
    import sys

    from swe_envs.docker_setup import BASE_TAG, docker_client, ensure_docker

    ensure_docker(log=lambda m: print(f"[docker setup] {m}", file=sys.stderr))
    return docker_client(), BASE_TAG
