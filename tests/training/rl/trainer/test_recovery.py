"""The trainer's push/commit protocol against a real in-process orchestrator (HTTP on 127.0.0.1,
no rollout servers: finished groups are put in its buffer directly, so the test is about the
trainer alone and costs a few tiny updates).

A trainer that dies between saving its checkpoint and committing the trained trajectories is the
window a process kill can hit; the kill is stood in for by an exception raised at that moment
(``os._exit`` would end pytest). The run must still account every trajectory trained exactly once,
in the update that trained it, and the servers must get the checkpoint's weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import training.rl.trainer.process as trainer_mod
from core.cli import load_cli_config
from training.policy.codec import Codec
from training.rl.rollout.groups import Group, Job
from training.rl.rollout.ledger import audit
from training.rl.rollout.orchestrator import Orchestrator
from training.rl.trainer.config import RLAsyncConfig
from training.rl.trainer.process import AsyncTrainer
from training.rl.trainer.run import initial_checkpoint, resolve_tokenizer

ROOT = Path(__file__).resolve().parents[4]
TINY = ["model.num_layers=2", "model.hidden_size=32", "model.ffn_hidden_size=64", "model.q_lora_rank=16",
        "model.kv_lora_rank=16", "model.qk_head_dim=8", "model.qk_pos_emb_head_dim=8", "model.v_head_dim=8",
        "model.moe_ffn_hidden_size=16", "model.moe_shared_expert_intermediate_size=16"]


class Killed(Exception):
    pass


def _put_group(orch: Orchestrator, gid: str, version: int, rewards: list[float]) -> None:
    g = Group(gid, "copy", {}, [{"role": "user", "content": "copy"}], [1, 2, 3], {}, version)
    for i, r in enumerate(rewards):
        t = g.new_trajectory(f"{gid}-{i}")
        t.add_turn([5, 6, 7], [-2.0, -2.0, -2.0], [version] * 3)
        t.finish_reason, t.reward = "stop", r
        orch.ledger.issue(t.id, "copy", gid)
        g.jobs.append(Job(t, g, stage="done"))
    with orch.cond:
        orch.ready.append(g)
        orch.cond.notify_all()


def _start(tmp_path: Path, *overrides: str):
    cfg = load_cli_config(RLAsyncConfig, ROOT / "configs/rl_async_tiny.yaml", [
        *TINY, "trainer.updates=2", "trainer.batch_groups=1", "trainer.push_every=1", "trainer.staleness=0",
        "trainer.reset_optimizer=true", "orchestrator.group_size=2", "orchestrator.tasks=[]",
        "orchestrator.rollout.replicas=0", *overrides])
    out = tmp_path / "run"
    out.mkdir()
    codec = Codec.load(resolve_tokenizer(cfg, out))
    initial_checkpoint(cfg, out, codec.vocab_size)
    orch = Orchestrator(cfg.orchestrator, out, codec, log=lambda m: None)
    return cfg, out, orch, orch.start()


@pytest.fixture()
def run(tmp_path):
    cfg, out, orch, url = _start(tmp_path)
    yield cfg, out, orch, url
    if not orch.stopping.is_set():
        orch.shutdown("run_ended")


def _optimizer_state(ckpt: Path) -> dict:
    return torch.load(ckpt / "optimizer.pt", weights_only=False)["optimizer"]["state"]


@pytest.mark.parametrize("reset", [True, False])
def test_push_every_k_updates_as_a_new_version_and_optimizer_reset_is_configurable(tmp_path, reset):
    """K = 2: updates 1-2 train on v0 and push v1, updates 3-4 on v1 and push v2, update 5 (the
    last) pushes v3; the optimizer's moments are dropped at each push only when configured."""
    cfg, out, orch, url = _start(tmp_path, "trainer.updates=5", "trainer.push_every=2", "trainer.staleness=9",
                                 f"trainer.reset_optimizer={str(reset).lower()}")
    try:
        for i in range(5):
            _put_group(orch, f"g{i}", 0, [1.0, 0.0])
        AsyncTrainer(cfg, out, url, log=lambda m: None).run()
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert [m["weight_version"] for m in metrics] == [0, 0, 1, 1, 2]  # the version each update trained
        assert [m["versions_behind_max"] for m in metrics] == [0, 0, 1, 1, 2]  # every group was sampled on v0
        assert orch.counters["weight_pushes"] == 3 and orch.weight_version == 3
        pushed = {int(p.name.split("-")[1]): json.loads((p / "trainer.json").read_text())["weight_version"]
                  for p in (out / "checkpoints").glob("step-*")}
        assert pushed == {2: 1, 4: 2, 5: 3}  # keep_checkpoints=3: step 0 has gone
        for step in (2, 4, 5):
            state = _optimizer_state(out / "checkpoints" / f"step-{step:08d}")
            assert (state == {}) is reset, (step, len(state))
        ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
        assert sorted((r["update"], r["trained_version"]) for r in ledger) == [
            (u, v) for u, v in ((1, 0), (2, 0), (3, 1), (4, 1), (5, 2)) for _ in range(2)]
    finally:
        orch.shutdown("run_ended")
    assert audit(out)["ok"]


@pytest.mark.parametrize("die_at", ["weights", "commit"])
def test_trainer_killed_between_checkpoint_and_commit(run, monkeypatch, die_at):
    cfg, out, orch, url = run
    _put_group(orch, "g0", 0, [1.0, 0.0])
    real = trainer_mod._orch

    def dies_in_push(u, route, body=None, timeout_s=600.0):
        if route == die_at and (route != "commit" or body.get("trained")):
            raise Killed(route)
        return real(u, route, body, timeout_s)

    monkeypatch.setattr(trainer_mod, "_orch", dies_in_push)
    with pytest.raises(Killed):
        AsyncTrainer(cfg, out, url, log=lambda m: None).run()
    monkeypatch.setattr(trainer_mod, "_orch", real)

    ckpt = out / "checkpoints" / "step-00000001"
    assert json.loads((ckpt / "trainer.json").read_text())["weight_version"] == 1
    # the optimizer was reset at the push: the checkpoint holds the reset state, not the old moments
    assert _optimizer_state(ckpt) == {}

    # meanwhile: a group too old for staleness 0 and a fresh one
    _put_group(orch, "g1", 0, [1.0, 0.0])
    _put_group(orch, "g2", 1, [0.0, 1.0])
    AsyncTrainer(cfg, out, url, log=lambda m: None).run()

    rows = {r["id"]: r for r in map(json.loads, (out / "ledger.jsonl").read_text().splitlines())}
    assert {i: (r["status"], r.get("update"), r["reason"]) for i, r in rows.items() if i.startswith("g0")} == {
        "g0-0": ("trained", 1, None), "g0-1": ("trained", 1, None)}  # once, in the update that trained it
    assert {rows[f"g1-{i}"]["reason"] for i in range(2)} == {"stale"}
    assert {(rows[f"g2-{i}"]["status"], rows[f"g2-{i}"]["update"]) for i in range(2)} == {("trained", 2)}
    assert orch.counters["groups_redelivered"] == 0
    # the restarted trainer re-pushed the checkpoint it resumed from when the push had not gone out
    assert orch.counters["weight_pushes"] == 2 and orch.weight_version == 2
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["update"] for m in metrics] == [1, 2]
    assert metrics[1]["stale_dropped"] == 2  # the all-stale batch before update 2 is counted in its row
    orch.shutdown("run_ended")
    assert audit(out)["ok"]


def test_shutdown_closes_every_issued_trajectory(run):
    """A trajectory issued but not yet in any queue when the run ends (its group still being
    built) is dropped with the run's reason, not lost."""
    _, out, orch, _ = run
    _put_group(orch, "g0", 0, [1.0, 0.0])
    orch.ledger.issue("g1-0", "copy", "g1")  # the creator issued it, the group is not enqueued yet
    orch.shutdown("run_ended")
    report = audit(out)
    assert report["ok"] and report["by_reason"] == {"run_ended": 3}, report
