from tests.training.glm_tiny import tiny_trainer
from training.tools.optimizer_comparison import compare, table


def test_three_optimizers_side_by_side(small_shards, tmp_path):
    cfg = tiny_trainer(steps=4)
    results = compare(cfg, small_shards["dir"], metrics_dir=tmp_path, log=lambda m: None)
    assert list(results) == ["adamw", "muon", "muon_split"]
    for name, r in results.items():
        assert r["steps"] == 4 and r["max_attn_logit"] > 0
        assert (tmp_path / f"{name}.jsonl").is_file()
    # same initialisation and batches: the first losses agree, the optimizers then differ
    assert len({r["first_lm_loss"] for r in results.values()}) == 1
    assert len({r["final_lm_loss"] for r in results.values()}) == 3
    text = table(results)
    assert text.splitlines()[0].split() == [
        "optimizer",
        "first",
        "loss",
        "final",
        "loss",
        "max",
        "logit",
        "last",
        "logit",
    ]
    assert len(text.splitlines()) == 4
