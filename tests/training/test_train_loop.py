import json

from training.loader import LoaderConfig
from training.model.tiny_lm import TinyLMConfig
from training.train_loop import TrainConfig, lr_at, train


def cfg(steps):
    return TrainConfig(
        steps=steps,
        lr=3e-3,
        warmup_steps=2,
        loader=LoaderConfig(batch_size=4, seed=0),
        model=TinyLMConfig(d_model=64, n_heads=4, n_layers=2, d_ff=128, max_seq_len=128),
    )


def test_loss_goes_down_on_real_shards(small_shards, tmp_path):
    state = train(small_shards["dir"], cfg(40), tmp_path / "m.jsonl", log=lambda m: None)
    losses = [m["loss"] for m in state["metrics"]]
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(40)) and lines[3]["loss"] == losses[3]


def test_resume_is_bit_exact(small_shards, tmp_path):
    straight = train(small_shards["dir"], cfg(8), log=lambda m: None)
    part = train(small_shards["dir"], cfg(8), tmp_path / "m.jsonl", log=lambda m: None, stop_after=3)
    assert part["step"] == 3
    resumed = train(small_shards["dir"], cfg(8), tmp_path / "m.jsonl", log=lambda m: None, state=part)
    assert [m["loss"] for m in resumed["metrics"]] == [m["loss"] for m in straight["metrics"]]
    for k, v in straight["model"].items():
        assert (resumed["model"][k] == v).all(), k
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 8


def test_lr_schedule():
    c = TrainConfig(steps=10, lr=1.0, warmup_steps=2)
    assert [round(lr_at(s, c), 3) for s in (0, 1, 2)] == [0.5, 1.0, 1.0]
    assert abs(lr_at(10, c) - 0.1) < 1e-9
