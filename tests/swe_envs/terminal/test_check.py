"""check.py without Docker: row verdicts and the unprovisioned needs a failed row names."""

from __future__ import annotations

from swe_envs.terminal.check import check_row, with_needs

CRATES = {"need": "crates from a registry (Cargo dependencies)", "offline": False}
IMAGE = {"need": "image buildpack-deps:jammy", "offline": True}


def _trial(reward, built=True, error=None):
    return {"built": built, "reward": reward, "error": error}


def test_failed_row_names_unprovisioned_needs():
    row = with_needs(check_row("t", _trial(0.0), _trial(0.0)), [IMAGE, CRATES])
    assert row["reason"] == ("oracle reward 0.0 (the reference solution does not pass) "
                             "[not provisioned offline: crates from a registry (Cargo dependencies)]")


def test_passing_or_fully_provisioned_rows_are_unchanged():
    ok = with_needs(check_row("t", _trial(1.0), _trial(0.0)), [CRATES])
    assert ok["ok"] and ok["reason"] == ""
    bad = with_needs(check_row("t", _trial(0.0), _trial(0.0)), [IMAGE])
    assert bad["reason"] == "oracle reward 0.0 (the reference solution does not pass)"
