"""``python -m training.hf``: config equals GLM-5's published one, logits of one sequence, an
imported checkpoint trains and samples like any other, bad input ends in one clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from training.hf.convert import import_hf, load_model
from training.hf.tiny import hf_model
from training.serving.sampler import SamplingParams, sample
from training.train_config import TrainerConfig
from training.trainer import train

ROOT = Path(__file__).resolve().parents[3]
# the shape fields of GLM-5's config.json (transformers' GlmMoeDsaConfig defaults are that config)
SHAPE = ["vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
         "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts",
         "routed_scaling_factor", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim",
         "qk_nope_head_dim", "n_group", "topk_group", "num_experts_per_tok", "norm_topk_prob", "rms_norm_eps",
         "index_topk", "index_head_dim", "index_n_heads", "first_k_dense_replace", "mlp_layer_types",
         "indexer_types", "max_position_embeddings", "tie_word_embeddings", "hidden_act", "qk_head_dim"]  # fmt: skip


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "training.hf", *args], cwd=cwd, capture_output=True, text=True)


def test_glm5_config_equals_the_published_shape(tmp_path):
    from transformers import AutoConfig, GlmMoeDsaConfig

    # from another directory, with the default --config (configs/glm5_744b.yaml)
    res = cli("config", "--out", str(tmp_path / "config.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    got = json.loads((tmp_path / "config.json").read_text())
    ref = GlmMoeDsaConfig().to_dict()
    assert got["model_type"] == "glm_moe_dsa" and got["architectures"] == ["GlmMoeDsaForCausalLM"]
    assert {k: got[k] for k in SHAPE} == {k: ref[k] for k in SHAPE}
    assert got["num_nextn_predict_layers"] == 1  # GLM-5's MTP layer
    back = AutoConfig.from_pretrained(tmp_path)  # transformers reads it back
    assert type(back).__name__ == "GlmMoeDsaConfig" and back.num_hidden_layers == 78


def test_logits_command_equals_transformers(tmp_path):
    hf = hf_model("glm_moe_dsa")
    hf.save_pretrained(tmp_path / "hf")
    res = cli("import", "--hf", str(tmp_path / "hf"), "--out", str(tmp_path / "ckpt"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    ids = [5, 1, 9, 33, 2, 2, 60, 7, 14, 3]
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    res = cli("logits", "--checkpoint", str(tmp_path / "ckpt"), "--input-ids", str(tmp_path / "ids.json"),
              "--out", str(tmp_path / "logits.npy"), cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = np.load(tmp_path / "logits.npy")
    assert got.dtype == np.float32 and got.shape == (len(ids), hf.config.vocab_size)
    with torch.no_grad():
        want = hf(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(got - want).max() <= 1e-4


@pytest.mark.slow  # minutes on 2 cores: `make test-slow` runs it
def test_imported_checkpoint_trains_and_samples(small_shards, tmp_path):
    vocab = small_shards["info"].vocab_size
    hf = hf_model("glm_moe_dsa", vocab_size=vocab)
    hf.save_pretrained(tmp_path / "hf")
    step0 = import_hf(tmp_path / "hf", tmp_path / "ckpt", log=lambda _m: None)
    saved = json.loads((step0 / "trainer.json").read_text())
    cfg = TrainerConfig.model_validate(saved["config"])
    cfg.steps, cfg.threads, cfg.checkpoint.dir = 2, 1, str(tmp_path / "ckpt")
    cfg.loader.batch_size = 2
    result = train(cfg, small_shards["dir"], resume=True, log=lambda _m: None)
    assert result.step == 2 and all(np.isfinite(m["loss"]) for m in result.metrics)
    model, step = load_model(tmp_path / "ckpt")
    assert step.name == "step-00000002"
    prompts = [[5, 6, 7, 8, 9, 10], [11], [12, 13, 14]]  # DSA top-k 4 < the lengths reached
    outs = sample(model, prompts, [SamplingParams(temperature=0, max_tokens=n) for n in (3, 7, 5)])
    assert [len(o.tokens) for o in outs] == [3, 7, 5]
    # and the trainer-written checkpoint exports back (expert bias moved by training)
    from transformers import AutoModelForCausalLM

    res = cli("export", "--checkpoint", str(tmp_path / "ckpt"), "--out", str(tmp_path / "hf2"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    back = AutoModelForCausalLM.from_pretrained(tmp_path / "hf2").eval()
    ids = torch.tensor([list(range(40, 56))])
    with torch.no_grad():
        diff = (back(ids).logits[0] - model(ids, [torch.tensor([16])])[0]).abs().max().item()
    assert diff <= 1e-4


def test_unsupported_transformers_config_is_one_clear_error(tmp_path):
    hf = hf_model("glm_moe_dsa", indexer_types=["full", "shared", "full"])
    hf.save_pretrained(tmp_path / "hf")
    res = cli("import", "--hf", str(tmp_path / "hf"), "--out", str(tmp_path / "ckpt"), cwd=tmp_path)
    assert res.returncode == 2
    assert "indexer_types 'shared'" in res.stderr and "Traceback" not in res.stderr
    res = cli("export", "--checkpoint", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert res.returncode == 2 and "no checkpoint" in res.stderr
