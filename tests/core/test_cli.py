import os
import signal

import pytest
import typer
from typer.testing import CliRunner

from core.cli import StepTimer, load_cli_config, user_errors
from core.config import StrictModel
from core.errors import ConfigError, UserError


class Cfg(StrictModel):
    a: int = 1
    b: str = "x"


def _app(sigterm: bool = False) -> typer.Typer:
    app = typer.Typer()
    seen = []

    @app.command()
    @user_errors(sigterm_unwinds=sigterm)
    def main(fail: bool = False, term: bool = False) -> None:
        try:
            if term:
                os.kill(os.getpid(), signal.SIGTERM)
            if fail:
                raise UserError("no such input: foo.jsonl")
            typer.echo("ok")
        finally:
            seen.append("cleaned up")

    app.seen = seen
    return app


def test_user_error_is_one_line_and_exit_2():
    res = CliRunner().invoke(_app(), ["--fail"])
    assert res.exit_code == 2 and "error: no such input: foo.jsonl" in res.output
    assert "Traceback" not in res.output
    assert CliRunner().invoke(_app(), []).output.strip() == "ok"


def test_sigterm_unwinds_through_finally():
    app = _app(sigterm=True)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        res = CliRunner().invoke(app, ["--term"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert isinstance(res.exception, KeyboardInterrupt) or res.exit_code != 0
    assert app.seen == ["cleaned up"]


def test_config_from_yaml_or_overrides(tmp_path):
    assert load_cli_config(Cfg, None, ["a=5"]) == Cfg(a=5)
    (tmp_path / "c.yaml").write_text("a: 3\nb: y\n")
    assert load_cli_config(Cfg, tmp_path / "c.yaml", ["b=z"]) == Cfg(a=3, b="z")
    (tmp_path / "bad.yaml").write_text("a: 3\nzzz: 1\n")
    with pytest.raises(ConfigError, match="zzz"):
        load_cli_config(Cfg, tmp_path / "bad.yaml", None)


def test_step_timer_logs_and_records_each_step_in_order():
    lines = []
    timer = StepTimer(lines.append)
    with timer("read"):
        pass
    with pytest.raises(RuntimeError), timer("broken"):
        raise RuntimeError("x")
    with timer("write"):
        pass
    assert list(timer.seconds) == ["read", "write"]  # a failed step has no time
    assert lines[0] == "── read ──" and lines[1].startswith("   read: ") and "── broken ──" in lines
