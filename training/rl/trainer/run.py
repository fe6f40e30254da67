"""``python -m training.rl train``: one asynchronous RL run.

``train --config configs/rl_async_tiny.yaml --out OUT`` is the supervisor of one asynchronous RL
run: it writes the initial checkpoint (weight_version 0), starts the orchestrator (which launches
and watches the rollout servers and task services), runs the trainer as its own process and
restarts it from its last checkpoint if it dies, and at the end drops every trajectory not yet
trained with the reason ``run_ended`` and audits the ledger. Outputs: ``OUT/metrics.jsonl`` (one
row per update: reward, weight_version, stale_dropped, idle_ratio, samples/s, versions behind),
``OUT/ledger.jsonl`` (one row per trajectory: task, status trained|dropped, reason),
``OUT/issued.jsonl``, ``OUT/faults.jsonl``, ``OUT/summary.json``, ``OUT/logs/`` (one log per process).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
import typer

from core.cli import load_cli_config, user_errors
from core.errors import ConfigError, UserError
from training.checkpoint import (
    checkpoint_config,
    checkpoint_step,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from training.model.glm import GLMModel
from training.optim.optimizers import build_optimizer
from training.policy import PolicySource, load_codec, load_policy
from training.rl import CONFIGS
from training.rl.rollout.ledger import audit
from training.rl.rollout.orchestrator import Orchestrator
from training.rl.trainer.config import RLAsyncConfig


def resolve_tokenizer(cfg: RLAsyncConfig, out: Path) -> Path | None:
    """OUT/tokenizer.json: the configured one (``smollm2``: SmolLM2's, from the user cache), or the
    toy tasks' (built from their alphabet); None for existing weights (``model: {hf|checkpoint}``),
    whose tokenizer travels with them."""
    dest = out / "tokenizer.json"
    if isinstance(cfg.model, PolicySource) and not cfg.tokenizer:
        return None
    if cfg.tokenizer == "smollm2":  # a real chat-sized vocabulary from the user cache (fetched once)
        from core.local_lm import obtain_smollm2

        shutil.copy(obtain_smollm2() / "tokenizer.json", dest)
    elif cfg.tokenizer:
        if not Path(cfg.tokenizer).is_file():
            raise ConfigError(f"tokenizer: not found: {cfg.tokenizer}")
        shutil.copy(cfg.tokenizer, dest)
    elif not dest.is_file():
        from training.rl.tasks.backends import toy_tokenizer

        toy_tokenizer().save(str(dest))
    return dest


def initial_checkpoint(cfg: RLAsyncConfig, out: Path, vocab: int) -> Path:
    """step-00000000 (weight_version 0): the init checkpoint's weights or a seeded random init."""
    ckpt_dir = out / "checkpoints"
    found = latest_checkpoint(ckpt_dir)
    if found is not None:
        return found
    if isinstance(cfg.model, PolicySource):  # existing weights, saved as step 0 in their own format
        policy = load_policy(cfg.model)
        return policy.save(ckpt_dir, 0, policy.optimizer(cfg.trainer.optimizer), {"update": 0, "weight_version": 0})
    if cfg.init_checkpoint:  # the weights to start from define the architecture (vocabulary included:
        # an SFT or pretraining run records the YAML's vocab_size 0, checkpoint_config reads the weights)
        cfg.model = checkpoint_config(checkpoint_step(cfg.init_checkpoint))
    elif cfg.model.vocab_size and cfg.model.vocab_size < vocab:
        raise ConfigError(f"model.vocab_size: {cfg.model.vocab_size} < tokenizer vocab {vocab}")
    else:
        cfg.model = cfg.model.model_copy(update={"vocab_size": cfg.model.vocab_size or vocab})
    torch.manual_seed(cfg.seed)
    model = GLMModel(cfg.model)
    if cfg.init_checkpoint:
        load_checkpoint(cfg.init_checkpoint, model)
    opt = build_optimizer(model, cfg.trainer.optimizer)
    path = save_checkpoint(ckpt_dir, 0, model, opt, {"update": 0, "weight_version": 0,
                                                     "config": {"model": cfg.model.model_dump(mode="json")}})
    shutil.copy(out / "tokenizer.json", path / "tokenizer.json")
    return path


def run_training(cfg: RLAsyncConfig, out: Path, resume: bool = False, log=print) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    if (out / "ledger.jsonl").exists() and not resume:
        raise UserError(f"{out} already holds a run (ledger.jsonl); pass --resume or choose another --out")
    t0 = time.monotonic()
    tok_path = resolve_tokenizer(cfg, out)
    ckpt = initial_checkpoint(cfg, out, load_codec(out, tok_path).vocab_size if tok_path else 0)
    codec = load_codec(ckpt, tok_path)
    meta = json.loads((ckpt / "trainer.json").read_text(encoding="utf-8"))
    if not isinstance(cfg.model, PolicySource):
        cfg.model = cfg.model.model_validate(meta["config"]["model"])  # a resumed run keeps its shapes
    orch_cfg = cfg.orchestrator.model_copy(update={"checkpoint": str(ckpt), "tokenizer": str(tok_path) if tok_path else None})
    (out / "config.json").write_text(cfg.model_copy(update={"orchestrator": orch_cfg}).model_dump_json(indent=1))
    # nothing is generated before the trainer starts: async and sync runs are timed from the same moment
    orch = Orchestrator(orch_cfg, out, codec, mode=cfg.trainer.mode, log=log, wait_for_trainer=True)
    orch.weight_version = int(meta.get("weight_version", 0))
    url = orch.start()
    log(f"orchestrator on {url} ({cfg.trainer.mode}); logs in {out / 'logs'}")
    restarts, rc = 0, None
    try:
        if not orch.wait_ready(orch_cfg.heartbeat.first_wait_s + 30):
            raise UserError(f"servers not healthy in time: {json.dumps(orch.registry.view())}")
        log(f"servers ready in {time.monotonic() - t0:.1f}s")
        while True:
            cmd = [sys.executable, "-m", "training.rl.trainer.process", "--config", str(out / "config.json"),
                   "--out", str(out), "--orchestrator", url]
            rc = subprocess.run(cmd).returncode
            if rc == 0:
                break
            if restarts >= cfg.trainer.max_restarts:
                raise UserError(f"trainer exited with {rc} after {restarts} restart(s); see above")
            restarts += 1
            log(f"trainer exited with {rc}; restarting from its last checkpoint ({restarts}/{cfg.trainer.max_restarts})")
    finally:
        status = orch.shutdown("run_ended")
        checked = audit(out)
        summary = {"wall_s": round(time.monotonic() - t0, 2), "mode": cfg.trainer.mode,
                   "trainer_restarts": restarts, "trainer_exit": rc, "ledger": checked,
                   "faults": status["faults"], "counters": status["counters"],
                   "groups_by_task": status["groups_by_task"], "servers": status["servers"],
                   "events": status["events"]}
        (out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return summary


app = typer.Typer(add_completion=False, help="Asynchronous RL: supervisor of one run.")


@app.command()
@user_errors(sigterm_unwinds=True)
def train(
    config: Path = typer.Option(CONFIGS / "rl_async_tiny.yaml", help="RL config YAML"),
    out: Path = typer.Option(Path("out/rl_async"), help="run directory"),
    resume: bool = typer.Option(False, help="continue the run in OUT from its last checkpoint"),
    set_: list[str] = typer.Option(None, "--set", help="override a config key, e.g. --set trainer.updates=4"),
) -> None:
    """Train with rollout servers, task services and an orchestrator, all as separate processes."""
    cfg = load_cli_config(RLAsyncConfig, config, set_)
    s = run_training(cfg, out, resume)
    led = s["ledger"]
    typer.echo(f"ledger: {led['issued']} issued = {led['trained']} trained + {led['dropped']} dropped "
               f"{led['by_reason']}; duplicated {len(led['duplicated'])}, lost {len(led['lost'])}")
    typer.echo(f"faults injected: {s['faults'] or 'none'}; trainer restarts: {s['trainer_restarts']}")
    typer.echo(f"wrote {out / 'metrics.jsonl'}, {out / 'ledger.jsonl'}, {out / 'summary.json'} in {s['wall_s']}s")
    if not led["ok"]:
        raise UserError("ledger audit failed: see summary.json")
