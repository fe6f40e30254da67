"""Parameter and FLOP calculator for GLM-5-shaped configs (no model is built).

``python -m training.tools.params configs/glm5_744b.yaml --json`` prints total/active parameters and
training FLOPs per token, with every assumption listed in ``assumptions``. Counting rules:

* total_params: every weight of the main model (embedding, decoder layers, final norm, untied
  output layer, the DSA indexer when configured); the MTP module is reported separately
  (``mtp_params``, ``total_params_with_mtp``) because published sizes exclude it.
* active_params: weights a token passes through in the decoder layers (attention, dense MLP,
  router, k routed + shared experts, norms), WITHOUT the input embedding and output layer.
  This convention reproduces both published pairs (744B/40B, 355B/32B);
  ``active_params_with_embeddings`` adds them back.
* flops_per_token: training (forward + backward = 3x forward) FLOPs of the main model at
  ``seq_len``: 2 per active matmul weight including the output layer (norms and biases are
  not matmuls), plus causal attention scores and values over an average context of
  (seq_len + 1) / 2. Attention is taken as dense
  (the DSA indexer's projections are counted; attention FLOPs are counted dense).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from core.config import load_yaml, validate_config
from core.errors import UserError
from training.model.config import ModelConfig, mla_256


def attention_params(c: ModelConfig) -> int:
    h, H = c.hidden_size, c.num_attention_heads
    if c.multi_latent_attention:
        qd, r = c.q_head_dim, c.qk_pos_emb_head_dim
        if c.q_lora_rank is None:
            q = h * H * qd
        else:
            q = h * c.q_lora_rank + c.q_lora_rank * H * qd + (c.q_lora_rank if c.qk_layernorm else 0)
        kv = h * (c.kv_lora_rank + r) + c.kv_lora_rank * H * (c.qk_head_dim + c.v_head_dim)
        kv += c.kv_lora_rank if c.qk_layernorm else 0
        return q + kv + H * c.v_head_dim * h
    d, G = c.gqa_head_dim, c.num_query_groups or H
    rows = (H + 2 * G) * d
    return h * rows + (rows if c.add_qkv_bias else 0) + (2 * d if c.qk_layernorm else 0) + H * d * h


def attention_norm_params(c: ModelConfig) -> int:
    """The vector (non-matmul) weights inside attention: latent / q-k norms and q/k/v biases."""
    if not c.qk_layernorm and not c.add_qkv_bias:
        return 0
    if c.multi_latent_attention:
        return (c.q_lora_rank or 0) + c.kv_lora_rank if c.qk_layernorm else 0
    rows = (c.num_attention_heads + 2 * (c.num_query_groups or c.num_attention_heads)) * c.gqa_head_dim
    return (2 * c.gqa_head_dim if c.qk_layernorm else 0) + (rows if c.add_qkv_bias else 0)


def indexer_params(c: ModelConfig) -> int:
    """DeepSeek-V3.2-style indexer: q from the query latent, one shared key, per-head weights."""
    if not c.dsa_indexer_n_heads:
        return 0
    nh, hd, h = c.dsa_indexer_n_heads, c.dsa_indexer_head_dim, c.hidden_size
    q_in = c.q_lora_rank or h
    return q_in * nh * hd + h * hd + 2 * hd + h * nh  # wq, wk, k LayerNorm (w+b), weights_proj


def mlp_params(c: ModelConfig, moe: bool) -> tuple[int, int]:
    """(total, active) parameters of one layer's MLP."""
    h = c.hidden_size
    if not moe:
        return 3 * h * c.ffn_hidden_size, 3 * h * c.ffn_hidden_size
    expert = 3 * h * c.moe_ffn_hidden_size
    shared = 3 * h * (c.moe_shared_expert_intermediate_size or 0)
    router = c.num_moe_experts * h
    return c.num_moe_experts * expert + shared + router, c.moe_router_topk * expert + shared + router


def attention_score_flops(c: ModelConfig, context: float) -> float:
    """Forward FLOPs per token of QK^T and PV (per layer) against ``context`` keys."""
    if c.multi_latent_attention:
        per_key = c.q_head_dim + c.v_head_dim
    else:
        per_key = 2 * c.gqa_head_dim
    return 2.0 * c.num_attention_heads * per_key * context


def decode_attention_flops(c: ModelConfig) -> dict[str, int]:
    """Per layer, per new token, per cached token: FLOPs of scores + weighted values.

    per_head: keys/values expanded per head (each head a (qk+rope)-dim dot product and a
    v-dim sum); absorbed_latent: MLA's absorbed form, every head scores the (kv_lora+rope)-dim
    cached latent and sums kv_lora dims."""
    H = c.num_attention_heads
    if not c.multi_latent_attention:
        return {"per_head": 2 * H * 2 * c.gqa_head_dim}
    return {
        "per_head": 2 * H * (c.q_head_dim + c.v_head_dim),
        "per_head_dot_dim": c.q_head_dim,
        "absorbed_latent": 2 * H * (2 * c.kv_lora_rank + c.qk_pos_emb_head_dim),
        "absorbed_dot_dim": c.kv_lora_rank + c.qk_pos_emb_head_dim,
        "kv_cache_numbers_per_token": c.kv_lora_rank + c.qk_pos_emb_head_dim,
    }


def count(c: ModelConfig, seq_len: int = 4096, causal: bool = True) -> dict[str, Any]:
    """Parameters and FLOPs of ``c``. ``causal=False`` charges attention for the full
    seq_len x seq_len scores (what an unmasked kernel computes)."""
    c.check()
    h, V = c.hidden_size, c.vocab_size
    if V <= 0:
        raise UserError("model.vocab_size: must be set to count parameters")
    attn, idx = attention_params(c), indexer_params(c)
    norms = 2 * h
    vec = norms + attention_norm_params(c) + (2 * c.dsa_indexer_head_dim if c.dsa_indexer_n_heads else 0)
    total = active = 0
    for moe in c.moe_pattern:
        t, a = mlp_params(c, moe)
        total += attn + idx + norms + t
        active += attn + idx + norms + a
    total += h  # final norm
    active += h
    emb = out = V * h
    mtp_total = mtp_active = 0
    if c.mtp_depths:
        t, a = mlp_params(c, c.moe_pattern[-1])
        base = 3 * h + 2 * h * h + attn + idx + norms  # enorm, hnorm, final norm, eh_proj, layer
        mtp_total, mtp_active = base + t, base + a
    context = (seq_len + 1) / 2 if causal else seq_len
    # 2 FLOPs per matmul weight: norm weights and biases are not matmuls
    matmul_active = active - c.num_layers * vec - h
    fwd = 2.0 * (matmul_active + out) + c.num_layers * attention_score_flops(c, context)
    mtp_matmul = mtp_active - vec - 3 * h
    mtp_fwd = c.mtp_depths * (2.0 * (mtp_matmul + out) + attention_score_flops(c, context))
    d_t, d_a = mlp_params(c, False)
    m_t, m_a = mlp_params(c, True) if c.num_moe_experts else (0, 0)
    return {
        "total_params": total + emb + out,
        "active_params": active,
        "flops_per_token": 3.0 * fwd,
        "active_params_with_embeddings": active + emb + out,
        "total_params_with_mtp": total + emb + out + mtp_total,
        "mtp_params": mtp_total,
        "mtp_active_params": mtp_active,
        "embedding_params": emb,
        "output_layer_params": out,
        "seq_len": seq_len,
        "forward_flops_per_token": fwd,
        "flops_per_token_with_mtp": 3.0 * (fwd + mtp_fwd),
        "per_layer": {
            "attention": attn,
            "dsa_indexer": idx,
            "dense_mlp": d_t,
            "moe_mlp_total": m_t,
            "moe_mlp_active": m_a,
            "dense_layers": c.moe_pattern.count(False),
            "moe_layers": c.moe_pattern.count(True),
        },
        "decode_attention_flops_per_cached_token": decode_attention_flops(c),
        "assumptions": assumptions(c),
    }


def assumptions(c: ModelConfig) -> list[str]:
    out = [
        "SwiGLU MLPs (3 matrices); no linear biases" + (" except q/k/v" if c.add_qkv_bias else ""),
        f"dense FFN intermediate size {c.ffn_hidden_size} (ffn_hidden_size) for the "
        f"{c.moe_pattern.count(False)} dense layers",
        "embedding and output layer untied, each vocab_size x hidden_size",
        "total_params excludes MTP (reported as mtp_params / total_params_with_mtp)",
        "active_params excludes the input embedding and output layer (see active_params_with_embeddings)",
        "RMSNorm weights counted; the expert bias is a buffer, not a parameter",
        "flops_per_token = 3 x forward (fwd + bwd), main model only, dense causal attention, "
        "average context (seq_len + 1) / 2",
    ]
    if c.dsa_indexer_n_heads:
        out.append(
            f"DSA indexer per layer ({c.dsa_indexer_n_heads} heads x {c.dsa_indexer_head_dim}) counted in "
            "params and projection FLOPs; attention FLOPs are counted dense (the top-"
            f"{c.dsa_indexer_topk} sparse core and the indexer's scores: training.model.dsa.dsa_flops, "
            "benchmarks/dsa_attention.py)"
        )
    if c.mtp_depths:
        out.append(
            f"MTP: one shared layer ({'MoE' if c.moe_pattern[-1] else 'dense'}) for {c.mtp_depths} depth(s)"
        )
    return out


def load_model_config(path: Path, overrides: list[str] | None = None) -> ModelConfig:
    """A model config from either a training YAML (its ``model:`` section) or a bare model YAML."""
    from core.config import apply_overrides

    data = load_yaml(path)
    if overrides:
        data = apply_overrides(data, overrides)
    section, where = (data["model"], f"{path}: model") if "model" in data else (data, str(path))
    return validate_config(ModelConfig, section, source=str(path)).check(where)


def _fmt(n: float) -> str:
    for unit, div in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}"


app = typer.Typer(add_completion=False, help="Count parameters and FLOPs/token of a model config.")


@app.command()
@user_errors
def main(
    config: Path = typer.Argument(..., help="training or model YAML (uses its model: section if present)"),
    json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
    seq_len: int = typer.Option(4096, help="sequence length for attention FLOPs"),
    mla256: bool = typer.Option(False, "--mla256", help="also count the MLA-256 variant of this config"),
    override: list[str] = typer.Option([], "--set", help="override a key, e.g. --set model.num_layers=4"),
) -> None:
    cfg = load_model_config(config, override)
    result = count(cfg, seq_len)
    if mla256:
        result["mla256"] = count(mla_256(cfg), seq_len)
    if json_out:
        typer.echo(json.dumps(result))
        return
    rows = [(config.name, result)] + ([("MLA-256 variant", result["mla256"])] if mla256 else [])
    for name, r in rows:
        typer.echo(f"== {name}")
        typer.echo(
            f"total params        {_fmt(r['total_params'])}  (with MTP {_fmt(r['total_params_with_mtp'])})"
        )
        typer.echo(
            f"active params       {_fmt(r['active_params'])}  (with embeddings {_fmt(r['active_params_with_embeddings'])})"
        )
        typer.echo(f"train FLOPs/token   {_fmt(r['flops_per_token'])}  at seq_len {r['seq_len']}")
        typer.echo(
            f"decode attention    {r['decode_attention_flops_per_cached_token']}  (per layer, per cached token)"
        )
    typer.echo("assumptions:")
    for a in result["assumptions"]:
        typer.echo(f"  - {a}")


if __name__ == "__main__":
    app()
