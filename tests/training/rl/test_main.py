"""``python -m training.rl``: the subcommand dispatcher."""

from __future__ import annotations

import subprocess
import sys


def test_cli_dispatcher():
    out = subprocess.run([sys.executable, "-m", "training.rl", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout and "stages" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "training.rl", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown subcommand" in bad.stderr
    demo = subprocess.run([sys.executable, "-m", "training.rl", "demo", "--help"], capture_output=True, text=True, check=True)
    assert "--out" in demo.stdout


def test_every_subcommand_has_help_and_its_default_config_from_any_directory(tmp_path):
    """Run from an empty directory: every subcommand answers --help, and a default config is the
    shipped file, not a path relative to where the command runs."""
    import importlib

    import typer

    from training.rl import CONFIGS
    from training.rl.__main__ import SUBCOMMANDS

    for name, (module, _) in SUBCOMMANDS.items():
        r = subprocess.run([sys.executable, "-m", "training.rl", name, "--help"], capture_output=True, text=True,
                           cwd=tmp_path)  # fmt: skip
        assert r.returncode == 0 and "Usage" in r.stdout, (name, r.stderr[-500:])
        params = typer.main.get_command(importlib.import_module(module).app).params
        config = next((p.default for p in params if p.name == "config"), None)
        if config is not None:
            assert config.parent == CONFIGS and config.is_file(), (name, config)
