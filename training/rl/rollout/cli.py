"""``python -m training.rl orchestrator --config C``: the orchestrator alone.

Serves registration, heartbeats, routing and the trainer protocol (see ``training.rl.rollout.orchestrator``)
with managed and external servers as configured, until interrupted; then drops what is left with
the reason ``orchestrator_stopped`` and writes ``OUT/summary.json``. ``C`` is an orchestrator YAML
or an RL config with an ``orchestrator:`` section (``configs/rl_async_tiny.yaml`` works as is).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from core.cli import user_errors
from core.config import load_yaml, validate_config
from core.errors import ConfigError
from training.policy import load_codec
from training.policy.codec import Codec
from training.rl.rollout.config import OrchestratorConfig
from training.rl.rollout.orchestrator import Orchestrator


def load_orchestrator_config(config: Path, out: Path) -> OrchestratorConfig:
    """The orchestrator section of ``config``. An RL config (``orchestrator:`` section) that names
    no checkpoint starts its managed rollout servers as ``train`` would: from a seeded init of its
    ``model`` (or its ``init_checkpoint``) written to OUT/checkpoints, with its tokenizer."""
    data = load_yaml(config)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(data.get("orchestrator"), dict):
        # an RL run's config: its start is prepared by the rule `train` uses (one rule, in its module)
        from training.rl.trainer.config import RLAsyncConfig
        from training.rl.trainer.run import initial_checkpoint, resolve_tokenizer

        rl = validate_config(RLAsyncConfig, data, str(config))
        cfg = rl.orchestrator
        if cfg.checkpoint is None and cfg.tokenizer is None:
            cfg.tokenizer = str(resolve_tokenizer(rl, out))
        if cfg.checkpoint is None and cfg.rollout.replicas:
            vocab = Codec.load(cfg.tokenizer).vocab_size if cfg.tokenizer else 0  # 0: existing weights
            cfg.checkpoint = str(initial_checkpoint(rl, out, vocab))
    else:
        cfg = validate_config(OrchestratorConfig, data, str(config))
    if cfg.tokenizer is None and cfg.checkpoint is None and cfg.tasks and all(t.kind == "toy" for t in cfg.tasks):
        # toy tasks only: the toy vocabulary's tokenizer, as `train` uses (servers must serve a model of it)
        from training.rl.tasks.backends import toy_tokenizer

        toy_tokenizer().save(str(out / "tokenizer.json"))
        cfg.tokenizer = str(out / "tokenizer.json")
    if cfg.tokenizer is None and cfg.checkpoint is None:
        raise ConfigError(f"{config}: tokenizer (or a checkpoint with its tokenizer) is required to render prompts")
    return cfg


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
    cfg = load_orchestrator_config(config, out)
    if port is not None:
        cfg.port = port
    orch = Orchestrator(cfg, out, load_codec(cfg.checkpoint, cfg.tokenizer), mode=mode)
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
