"""Hostile tool calls in environment sessions (swe_envs/sessions/session.py), the containers RL
rollouts and external agents drive: a Harbor task's session and a SWE session, opened exactly as the
session service opens them. Each call tries to read a secret set in the host's environment (a
trainer's or a CI job's token) and to hold a capability beyond what the runner gives back (none for
SWE sessions); `make chaos`'s table records each attempt."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from tests.reliability.ledger import LEDGER
from tests.reliability.test_containment_terminal import cap_mask
from tests.swe_envs.terminal.tiny_tasks import tiny_task

pytestmark = pytest.mark.docker
AREA = "containment: sessions"
# the secret, every /proc/*/environ, and the process's capabilities, user and no_new_privs
PROBE = ("env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; "
         "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; echo uid=$(id -u)")


def _secret(monkeypatch) -> str:
    secret = f"host-env-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("GLM5_HOSTILE_SECRET", secret)
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    return secret


def _record(kind: str, secret: str, out: str, allowed: int = 0) -> tuple[bool, bool]:
    """``allowed``: the capability bits the container was given back (cap_mask)."""
    no_secret = secret not in out
    eff = next((int(x.split()[1], 16) for x in out.splitlines() if x.startswith("CapEff:")), None)
    no_caps = eff is not None and eff & ~allowed == 0 and "NoNewPrivs:\t1" in out
    LEDGER.attempt(AREA, f"{kind}: read a secret set in the host's environment", no_secret,
                   "not in the container's environment" if no_secret else "ESCAPED: the secret is in the container")
    LEDGER.attempt(AREA, f"{kind}: hold a capability beyond those given back", no_caps,
                   " ".join(x for x in out.splitlines() if x.startswith(("CapEff", "NoNewPrivs", "uid=")))
                   if no_caps else "ESCAPED: " + " ".join(out.splitlines()[-3:]))
    return no_secret, no_caps


@pytest.mark.area(AREA)
def test_terminal_session_tool_calls_see_no_host_secret_and_no_capability(docker_engine, tmp_path, monkeypatch):
    from swe_envs.sessions.session import TerminalSession
    from swe_envs.terminal.config import TerminalConfig
    from swe_envs.terminal.trial import Context

    secret = _secret(monkeypatch)
    session = TerminalSession(Context(TerminalConfig(), log=lambda m: None), tiny_task(tmp_path / "tasks"),
                              tmp_path / "verifier")
    try:
        out = session.step("bash", {"command": PROBE}).text
    finally:
        session.close()
    allowed = cap_mask(TerminalConfig().runner.cap_add)
    assert _record("terminal session", secret, out, allowed) == (True, True), out[-1500:]


@pytest.mark.area(AREA)
def test_swe_session_tool_calls_see_no_host_secret_and_no_capability(docker_engine, monkeypatch):
    """A SWE session on a toolchain image (the layer every verified environment starts from): the
    container options are SweSession's own; only the harness's plan, the warm image and the verifier
    pool (which grade, never run tool calls) are stubbed."""
    from swe_envs.config import SweEnvsConfig
    from swe_envs.images import Images
    from swe_envs.sandbox import Sandbox
    from swe_envs.sessions.session import SweSession

    client, _ = docker_engine
    cfg = SweEnvsConfig()
    tc = Images(client, cfg.build).toolchain("python", cfg.toolchain("python"))
    assert tc.ok, tc.error or tc.log[-1000:]
    plan = SimpleNamespace(image=tc.tag, base=[], network="none", command="true", f2p=[], p2p=[], runner="pytest",
                           scheme="native")
    evaluator = SimpleNamespace(plan=lambda inst, members: plan, cfg=cfg,
                                builder=SimpleNamespace(sandbox=Sandbox(client, cfg.sandbox), images=None))
    host = SimpleNamespace(evaluator=evaluator, warm=SimpleNamespace(get=lambda image: image),
                           verifiers=SimpleNamespace(prime=lambda *a: None))
    secret = _secret(monkeypatch)
    session = SweSession(host, {"instance_id": "hostile__session-1", "base_commit": "c0", "repo": "hostile/x",
                                     "problem_statement": "probe"})
    try:
        out = session.step("bash", {"command": PROBE}).text
    finally:
        session.close()
    assert "uid=10001" in out, out[-1000:]
    assert _record("SWE session", secret, out) == (True, True), out[-1500:]
