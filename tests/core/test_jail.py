"""The jail for untrusted code (core/jail.py): its install decision, and no run without it."""

from __future__ import annotations

import pytest

from core import jail
from swe_envs.envs.parsers.llm import ParserRunError, run_parser_full


def test_setup_installs_exactly_what_is_missing():
    assert jail.packages_to_install(True, True) == []
    assert jail.packages_to_install(False, True) == ["bubblewrap"]
    assert jail.packages_to_install(True, False) == ["libseccomp2"]
    assert jail.packages_to_install(False, False) == ["bubblewrap", "libseccomp2"]


def test_this_machine_has_the_jail():
    """`make setup` installed it (CI runs on a machine set up by the project's own files)."""
    assert jail.unavailable() == ""
    res = jail.run("import os, sys; print(os.getuid(), os.getgid(), sorted(os.listdir('/')), sys.stdin.read())",
                   b"hello")
    uid, gid, *rest = res.stdout.decode().split(" ", 2)
    assert res.returncode == 0 and (uid, gid) == ("65534", "65534") and rest[0].endswith("hello\n")
    assert "etc" not in rest[0] and "home" not in rest[0] and "tmp" not in rest[0]


def test_without_bubblewrap_untrusted_code_is_not_run(monkeypatch, tmp_path):
    """No fallback to an unjailed child: the parser is refused with the reason."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    jail.unavailable.cache_clear()
    try:
        with pytest.raises(jail.JailError) as err:
            jail.run("print(1)")
        assert err.value.kind == "no_isolation" and "bubblewrap" in err.value.message
        with pytest.raises(ParserRunError) as perr:
            run_parser_full("def parse(log):\n    return {'a': 'passed'}\n", "a ok")
        assert perr.value.kind == "no_isolation"
    finally:
        monkeypatch.undo()
        jail.unavailable.cache_clear()
    assert jail.unavailable() == ""


def test_limits_are_reported_by_kind():
    with pytest.raises(jail.JailError) as err:
        jail.run("import time; time.sleep(60)", limits=jail.Limits(timeout_s=1))
    assert err.value.kind == "timeout"
    with pytest.raises(jail.JailError) as err:
        jail.run("import sys\nwhile True: sys.stdout.write('x' * 65536)", limits=jail.Limits(timeout_s=20, output_mb=2))
    assert err.value.kind == "output_limit"
    res = jail.run("while True: pass", limits=jail.Limits(timeout_s=10, cpu_s=1))
    assert res.returncode == 128 + 24  # SIGXCPU at the soft CPU limit
