import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.errors import ConfigError, UserError
from tests.training.glm_tiny import tiny_trainer
from training.optim.schedules import ScheduleConfig, lr_at
from training.train_config import TrainStageConfig
from training.trainer import train

ROOT = Path(__file__).resolve().parents[2]
quiet = {"log": lambda m: None}


@pytest.fixture(scope="module")
def long_shards(small_job, small_shards, tmp_path_factory):
    """The same documents packed at seq_len 256 for a mid-training stage (as the long-context
    jobs write them: the manifest names the stage and the sequence length)."""
    from pipelines.pack import PackConfig, pack_documents

    out = tmp_path_factory.mktemp("long_shards")
    pack_documents(
        small_job.documents_dir,
        small_shards["tokenizer"],
        small_shards["info"],
        out,
        PackConfig(seq_len=256, sequences_per_shard=100, stage="mid-256"),
        progress=False,
    )
    return out


def test_schedules():
    cos = ScheduleConfig(kind="cosine", warmup_steps=2, min_lr_ratio=0.1)
    assert [lr_at(s, 10, cos, 1.0) for s in (0, 1, 2)] == [0.5, 1.0, 1.0]
    assert abs(lr_at(10, 10, cos, 1.0) - 0.1) < 1e-12
    assert lr_at(6, 10, cos, 1.0) < lr_at(4, 10, cos, 1.0)
    wsd = ScheduleConfig(kind="wsd", warmup_steps=2, decay_fraction=0.3, min_lr_ratio=0.0)
    lrs = [lr_at(s, 20, wsd, 1.0) for s in range(20)]
    assert lrs[:2] == [0.5, 1.0] and set(lrs[2:14]) == {1.0}
    assert all(a > b for a, b in zip(lrs[14:], lrs[15:], strict=False)) and lrs[-1] == 0.0
    assert lr_at(7, 10, ScheduleConfig(kind="constant", warmup_steps=0), 2.0) == 2.0


def test_loss_goes_down_and_metrics_are_jsonl(small_shards, tmp_path):
    cfg = tiny_trainer(steps=25)
    res = train(cfg, small_shards["dir"], tmp_path / "m.jsonl", **quiet)
    losses = [m["lm_loss"] for m in res.metrics]
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(25))
    assert {"loss", "lm_loss", "mtp_loss", "lr", "grad_norm", "expert_load_max_over_mean"} <= set(lines[0])
    assert lines[3]["loss"] == res.metrics[3]["loss"]


def test_resume_is_bit_exact_across_a_stage_switch(small_shards, long_shards, tmp_path):
    def cfg(ckpt: Path | None):
        c = tiny_trainer(moe_router_bias_update_rate=0.01)
        c.optimizer.qk_clip_tau = 1e-3  # QK-clip on (and firing): its edits must resume exactly too
        c.stages = [
            TrainStageConfig(name="pre", shards=str(small_shards["dir"]), steps=3),
            TrainStageConfig(
                name="long", shards=str(long_shards), steps=3, batch_size=2, manifest_stage="mid-256"
            ),
        ]
        c.checkpoint.dir = str(ckpt) if ckpt else None
        return c

    straight = train(cfg(None), None, tmp_path / "a.jsonl", **quiet)
    assert [m["seq_len"] for m in straight.metrics] == [128] * 3 + [256] * 3
    assert [m["stage"] for m in straight.metrics] == ["pre"] * 3 + ["long"] * 3
    assert any(m["qk_clipped_heads"] for m in straight.metrics)

    ckpt = tmp_path / "ckpt"
    first = train(cfg(ckpt), None, tmp_path / "b.jsonl", stop_after=2, **quiet)  # mid-stage
    assert first.step == 2 and first.checkpoint.name == "step-00000002"
    second = train(cfg(ckpt), None, tmp_path / "b.jsonl", stop_after=2, **quiet)  # across the switch
    third = train(cfg(ckpt), None, tmp_path / "b.jsonl", **quiet)
    got = first.metrics + second.metrics + third.metrics
    drop = ("tokens_per_s",)
    assert [{k: v for k, v in m.items() if k not in drop} for m in got] == [
        {k: v for k, v in m.items() if k not in drop} for m in straight.metrics
    ]
    final_a, final_b = straight.model.state_dict(), third.model.state_dict()
    assert all(torch.equal(final_a[k], final_b[k]) for k in final_a)
    assert len((tmp_path / "b.jsonl").read_text().splitlines()) == 6


def test_checkpoint_from_another_config_is_refused(small_shards, tmp_path):
    cfg = tiny_trainer(steps=1)
    cfg.checkpoint.dir = str(tmp_path / "ckpt")
    train(cfg, small_shards["dir"], **quiet)
    other = tiny_trainer(steps=2, kv_lora_rank=8, mtp_num_layers=None)
    other.checkpoint.dir = cfg.checkpoint.dir
    with pytest.raises(UserError) as err:
        train(other, small_shards["dir"], **quiet)
    msg = str(err.value)
    assert "another model config" in msg and "linear_kv_up_proj.weight" in msg and "mtp.eh_proj.weight" in msg


def test_checkpoint_keep_leaves_the_newest(small_shards, tmp_path):
    cfg = tiny_trainer(steps=4)
    cfg.checkpoint.dir, cfg.checkpoint.every, cfg.checkpoint.keep = str(tmp_path / "ckpt"), 1, 2
    train(cfg, small_shards["dir"], **quiet)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-00000003", "step-00000004"]


def test_stage_manifest_must_match(small_shards):
    cfg = tiny_trainer()
    cfg.stages = [
        TrainStageConfig(name="long", shards=str(small_shards["dir"]), steps=1, manifest_stage="mid-256")
    ]
    with pytest.raises(ConfigError, match="stages.long.manifest_stage"):
        train(cfg, None, **quiet)


def test_bf16_autocast_trains(small_shards):
    cfg = tiny_trainer(steps=2)
    cfg.precision = "bf16"
    res = train(cfg, small_shards["dir"], **quiet)
    assert all(torch.isfinite(torch.tensor(m["loss"])) for m in res.metrics)


def test_cli_trains_and_explains_itself(small_shards, tmp_path):
    cfg_path = tmp_path / "t.yaml"
    cfg_path.write_text(json.dumps(tiny_trainer(steps=2).model_dump(mode="json")))  # JSON is YAML
    cmd = [
        sys.executable,
        "-m",
        "training.trainer",
        "--config",
        str(cfg_path),
        "--shards",
        str(small_shards["dir"]),
    ]
    out = subprocess.run(
        cmd + ["--metrics", str(tmp_path / "m.jsonl")], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert "trained 2 steps" in out.stdout and len((tmp_path / "m.jsonl").read_text().splitlines()) == 2
    bad = subprocess.run(
        cmd + ["--set", "model.moe_router_topk=99"], capture_output=True, text=True, cwd=ROOT
    )
    assert bad.returncode == 2 and "model.moe_router_topk" in bad.stderr and "Traceback" not in bad.stderr
    help_ = subprocess.run(
        [sys.executable, "-m", "training.trainer", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert help_.returncode == 0 and "--shards" in help_.stdout
