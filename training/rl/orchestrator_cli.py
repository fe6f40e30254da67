"""``python -m training.rl orchestrator --config C``: the orchestrator alone.

Serves registration, heartbeats, routing and the trainer protocol (see ``training.rl.orchestrator``)
with managed and external servers as configured, until interrupted; then drops what is left with
the reason ``orchestrator_stopped`` and writes ``OUT/summary.json``. ``C`` is an orchestrator YAML
or an RL config with an ``orchestrator:`` section.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from core.cli import user_errors
from core.config import load_yaml, validate_config
from core.errors import ConfigError
from training.rl.orchestrator import Orchestrator
from training.rl.orchestrator_config import OrchestratorConfig
from training.serving.codec import Codec

app = typer.Typer(add_completion=False, help="Run the multi-task rollout orchestrator.")


@app.command()
@user_errors(sigterm_unwinds=True)
def orchestrator(
    config: Path = typer.Option(..., help="orchestrator YAML (or an RL config with an `orchestrator:` section)"),
    out: Path = typer.Option(Path("out/orchestrator"), help="ledger, faults and logs go here"),
    mode: str = typer.Option("async", help="async (generate ahead) | sync (generate on demand)"),
    port: int = typer.Option(None, help="override orchestrator.port"),
    port_file: Path = typer.Option(None, help="write the bound port here once listening"),
) -> None:
    """Serve registration, heartbeats, routing and the trainer protocol until interrupted."""
    if mode not in ("async", "sync"):
        raise ConfigError(f"--mode must be async or sync, got {mode!r}")
    data = load_yaml(config)
    data = data.get("orchestrator", data) if isinstance(data.get("orchestrator"), dict) else data
    cfg = validate_config(OrchestratorConfig, data, str(config))
    if port is not None:
        cfg.port = port
    if (cfg.rollout.replicas or cfg.tasks) and cfg.tokenizer is None and cfg.checkpoint:
        cfg.tokenizer = str(Path(cfg.checkpoint) / "tokenizer.json")
    if cfg.tokenizer is None:
        raise ConfigError(f"{config}: tokenizer (or checkpoint with a tokenizer.json) is required to render prompts")
    out.mkdir(parents=True, exist_ok=True)
    orch = Orchestrator(cfg, out, Codec.load(cfg.tokenizer), mode=mode)
    url = orch.start()
    if port_file:
        port_file.write_text(url.rsplit(":", 1)[1])
    typer.echo(f"orchestrator on {url} (POST /register, /batch, /commit, /weights; GET /status)", err=True)
    try:
        while True:
            time.sleep(10)
            st = orch.status()
            typer.echo(f"queues {st['queues']} ledger {st['ledger']}", err=True)
    except KeyboardInterrupt:
        st = orch.shutdown("orchestrator_stopped")
        (out / "summary.json").write_text(json.dumps(st, indent=1), encoding="utf-8")
        typer.echo(f"stopped; ledger {st['ledger']}", err=True)
