"""Rollout sampling: decode tokens/s and KV-cache bytes, our sampler vs Hugging Face ``generate``.

Ours: ``training.serving.sampler.sample`` (batched, left-padded prompts, MLA *latent* KV cache: per
layer and token, kv_lora + rope numbers) over ``training.model.glm.GLMModel``. Baseline:
``transformers``' ``DeepseekV3ForCausalLM.generate`` on a model of the same architecture and
size (MLA with q/kv LoRA, decoupled RoPE, 1 dense + MoE layers, shared expert, sigmoid top-k
router; random init, no MTP; the parameter counts are printed and equal). Both sample with
temperature 1, no top-k/top-p, no stop token, the same batch and lengths, in fp32 on
--threads CPU threads (default 1: at these sizes a second thread gains little and, on a shared
machine, oversubscription makes multi-threaded timings erratic). transformers 5.x caches MLA's latent too, but expands it into per-head
keys and values for every layer at every step; our decode attends in the latent space
(absorbed up-projections).

Decode tokens/s = batch / (the median time from one decode step's model call to the next, over
the N - 1 decode steps of --repeat runs): the prompt's prefill is left out, sampling overhead
between calls is included, and a burst of load from elsewhere on a shared machine moves a
median little. Cache memory is measured on tensors
after the prompt, not computed: ours is the ``nbytes`` of our latent caches; the full KV cache
(what a standard MHA-style cache of this model holds: per-head keys and values) is the
``nbytes`` of the keys and values transformers' attention expands from its cache
(``DeepseekV3Attention.expand_kv``). Contexts: 1K (batch 4) and 8K (batch 1).
Writes out/bench/sampler.json. Run: `python benchmarks/sampler.py [--new-tokens 32] [--quick]`.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _report import Result, write

from training.model.config import ModelConfig
from training.model.glm import GLMModel
from training.serving.sampler import SamplingParams, sample

# one architecture, written in both configs' vocabularies
DIMS = dict(layers=4, dense_layers=1, hidden=256, ffn=512, heads=8, q_lora=128, kv_lora=64, qk=32, rope=16,
            v=32, experts=8, topk=2, moe_ffn=128, vocab=8192)  # fmt: skip


def ours_model(d: dict) -> GLMModel:
    cfg = ModelConfig(
        num_layers=d["layers"], hidden_size=d["hidden"], ffn_hidden_size=d["ffn"], num_attention_heads=d["heads"],
        vocab_size=d["vocab"], q_lora_rank=d["q_lora"], kv_lora_rank=d["kv_lora"], qk_head_dim=d["qk"],
        qk_pos_emb_head_dim=d["rope"], v_head_dim=d["v"], num_moe_experts=d["experts"], moe_router_topk=d["topk"],
        moe_ffn_hidden_size=d["moe_ffn"], moe_shared_expert_intermediate_size=d["moe_ffn"],
        moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True,
        moe_router_topk_scaling_factor=2.5, moe_first_k_dense_layers=d["dense_layers"],
    )  # fmt: skip
    return GLMModel(cfg).eval()


def hf_model(d: dict):
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    cfg = DeepseekV3Config(
        vocab_size=d["vocab"], hidden_size=d["hidden"], intermediate_size=d["ffn"], moe_intermediate_size=d["moe_ffn"],
        num_hidden_layers=d["layers"], num_attention_heads=d["heads"], num_key_value_heads=d["heads"],
        n_shared_experts=1, n_routed_experts=d["experts"], num_experts_per_tok=d["topk"],
        first_k_dense_replace=d["dense_layers"], q_lora_rank=d["q_lora"], kv_lora_rank=d["kv_lora"],
        qk_nope_head_dim=d["qk"], qk_rope_head_dim=d["rope"], v_head_dim=d["v"], n_group=1, topk_group=1,
        routed_scaling_factor=2.5, max_position_embeddings=16384, pad_token_id=0, bos_token_id=None,
        eos_token_id=None, tie_word_embeddings=False,
    )  # fmt: skip
    return DeepseekV3ForCausalLM(cfg).eval()


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class StepClock:
    """Start times of a model's forward calls during one generation: the first call is the
    prefill, the gap between two later calls is one decode step (model + sampling)."""

    def __init__(self, module: torch.nn.Module, method: str):
        self.module, self.method, self.starts = module, method, []

    def __enter__(self) -> StepClock:
        inner = getattr(self.module, self.method)

        def timed_call(*args, **kwargs):
            self.starts.append(time.perf_counter())
            return inner(*args, **kwargs)

        setattr(self.module, self.method, timed_call)  # an instance attribute shadows the method
        return self

    def __exit__(self, *exc) -> None:
        delattr(self.module, self.method)

    def steps(self) -> list[float]:
        return [b - a for a, b in zip(self.starts[1:], self.starts[2:], strict=False)]


def ours_generate(model: GLMModel, prompts: list[list[int]], n: int) -> None:
    outs = sample(model, prompts, SamplingParams(temperature=1.0, max_tokens=n), torch.Generator().manual_seed(0))
    assert all(len(o.tokens) == n for o in outs)


def hf_generate(model, prompts: torch.Tensor, n: int) -> None:
    out = model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=n, min_new_tokens=n,
                         do_sample=True, temperature=1.0, top_k=None, top_p=None)  # fmt: skip
    assert out.shape[1] == prompts.shape[1] + n


@torch.no_grad()
def cache_bytes(ours: GLMModel, hf, prompts: torch.Tensor) -> tuple[int, int, int]:
    """(our latent cache, transformers' cache as stored, the full per-head K/V) in bytes after
    the prompt, each summed over the tensors themselves."""
    _, caches = ours.decode(prompts)
    mine = sum(t.nbytes for c in caches for t in (c.c_kv, c.k_rope, getattr(c, "k_index", None)) if t is not None)
    out = hf(prompts, use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    stored = full = 0
    for layer, block in zip(cache.layers, hf.model.layers, strict=True):
        stored += layer.keys.nbytes + layer.values.nbytes
        k, v = block.self_attn.expand_kv(layer.keys, layer.values)
        full += k.nbytes + v.nbytes
    return mine, stored, full


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--new-tokens", type=int, default=32, help="tokens generated per row (N)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per timing; the best is kept (shared machine)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads for both")
    ap.add_argument("--quick", action="store_true", help="contexts 256 and 1K only (a smoke run)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    ours, hf = ours_model(DIMS), hf_model(DIMS)
    p_ours, p_hf = n_params(ours), n_params(hf)
    print(f"params: ours {p_ours:,}, transformers DeepseekV3 {p_hf:,}; {torch.get_num_threads()} threads")
    settings = [(256, 4), (1024, 1)] if a.quick else [(1024, 4), (8192, 1)]
    g = torch.Generator().manual_seed(1)
    rows: list[Result] = []
    inputs = {"dims": DIMS, "params_ours": p_ours, "params_hf": p_hf, "new_tokens": a.new_tokens,
              "threads": torch.get_num_threads(), "contexts": {}}  # fmt: skip
    n = a.new_tokens
    for ctx, batch in settings:
        prompts = torch.randint(1, DIMS["vocab"], (batch, ctx), generator=g)
        plist = prompts.tolist()
        ours_generate(ours, plist, 2)  # warm-up (allocator, first-call paths)
        hf_generate(hf, prompts, 2)
        steps = {"ours": [], "hf": []}
        prefill = {"ours": [], "hf": []}
        for _ in range(a.repeat):  # interleaved, so a burst of load from elsewhere hits both alike
            for key, clock, fn in (("ours", StepClock(ours, "decode"), lambda p=plist: ours_generate(ours, p, n)),
                                   ("hf", StepClock(hf, "forward"), lambda p=prompts: hf_generate(hf, p, n))):  # fmt: skip
                with clock:
                    fn()
                assert len(clock.starts) == n, (key, len(clock.starts))  # one prefill + n - 1 decode calls
                steps[key] += clock.steps()
                prefill[key].append(clock.starts[1] - clock.starts[0])
        tps_ours = batch / statistics.median(steps["ours"])
        tps_hf = batch / statistics.median(steps["hf"])
        b_ours, b_stored, b_hf = cache_bytes(ours, hf, prompts)
        label = f"{ctx // 1024}K" if ctx >= 1024 else str(ctx)
        print(f"context {ctx} x batch {batch}: decode ours {tps_ours:7.1f} tok/s, HF generate {tps_hf:7.1f} tok/s; "
              f"KV cache ours {b_ours / 2**20:7.2f} MiB (latent), full K/V {b_hf / 2**20:7.2f} MiB "
              f"(transformers stores {b_stored / 2**20:.2f} MiB)")  # fmt: skip
        inputs["contexts"][label] = {"context": ctx, "batch": batch, "hf_cache_as_stored_mib": b_stored / 2**20,
                                     "prefill_s_ours": min(prefill["ours"]), "prefill_s_hf": min(prefill["hf"])}
        rows.append(Result(f"sampler decode {label} context", tps_ours, tps_hf, "tokens/s",
                           ours_label="training.serving.sampler.sample (MLA latent cache)",
                           baseline_label="transformers DeepseekV3ForCausalLM.generate (same dims and parameter count)"))  # fmt: skip
        rows.append(Result(f"sampler kv cache {label} context", b_ours / 2**20, b_hf / 2**20, "MiB",
                           higher_is_better=False, ours_label="latent cache (c_kv + roped key)",
                           baseline_label="full KV cache: per-head keys and values (transformers' expand_kv)"))  # fmt: skip
    write(__file__, rows[0], inputs, rows[1:])


if __name__ == "__main__":
    main()
