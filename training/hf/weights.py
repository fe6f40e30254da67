"""State-dict conversion between our GLM model and transformers' glm_moe_dsa / glm4_moe / deepseek_v3.

Names (ours -> theirs, ``L`` = ``decoder.layers.i`` -> ``model.layers.i``):
``embedding.word_embeddings`` -> ``model.embed_tokens``; ``decoder.final_layernorm`` -> ``model.norm``;
``output_layer`` -> ``lm_head``; ``L.input_layernorm`` / ``L.pre_mlp_layernorm`` -> ``input_layernorm`` /
``post_attention_layernorm``; MLA ``linear_q_down_proj`` / ``q_layernorm`` / ``linear_q_up_proj`` /
``linear_q_proj`` / ``linear_kv_down_proj`` / ``kv_layernorm`` / ``linear_kv_up_proj`` / ``linear_proj`` ->
``q_a_proj`` / ``q_a_layernorm`` / ``q_b_proj`` / ``q_proj`` / ``kv_a_proj_with_mqa`` / ``kv_a_layernorm`` /
``kv_b_proj`` / ``o_proj`` (same row layouts: per head [nope; rope] and [k_nope; v]); GQA's fused
``linear_qkv`` (per group: its query heads, one key, one value) -> ``q_proj`` / ``k_proj`` / ``v_proj``;
indexer ``linear_wq_b`` / ``linear_wk`` / ``k_norm`` / ``linear_weights_proj`` -> ``wq_b`` / ``wk`` /
``k_norm`` / ``weights_proj`` (RoPE dims moved from last to first, see ``config_map``); fused
``linear_fc1`` [gate; up] -> ``gate_proj`` + ``up_proj``; router ``weight`` / ``expert_bias`` ->
``gate.weight`` / ``gate.e_score_correction_bias``; stacked experts -> ``experts.{e}.{gate,up,down}_proj``
(the hub layout ``save_pretrained`` writes; the fused ``experts.gate_up_proj`` / ``down_proj`` of
transformers' in-memory modules is read too); ``mtp.*`` -> the NextN layer ``model.layers.{N}``.
"""

from __future__ import annotations

import re

import torch

from core.errors import UserError
from training.model.config import ModelConfig

Tensors = dict[str, torch.Tensor]


def _rope_perm(rope: int) -> torch.Tensor:
    """Ours-from-theirs row order for half-split (non-interleaved) RoPE dims: ours de-interleaves
    before rotating halves, so ours[2i] = theirs[i], ours[2i+1] = theirs[i + rope/2]."""
    half = torch.arange(rope // 2)
    return torch.stack((half, half + rope // 2), -1).reshape(-1)


def _permute_rope_rows(w: torch.Tensor, period: int, start: int, rope: int) -> torch.Tensor:
    """Reorder rows [start, start+rope) inside every block of ``period`` rows by ``_rope_perm``."""
    blocks = w.reshape(-1, period, *w.shape[1:]).clone()
    blocks[:, start : start + rope] = blocks[:, start : start + rope][:, _rope_perm(rope)]
    return blocks.reshape(w.shape)


def _roll_rows(w: torch.Tensor, period: int, shift: int) -> torch.Tensor:
    """Roll the rows of every block of ``period`` rows by ``shift`` (indexer [nope, rope] <-> [rope, nope])."""
    return w.reshape(-1, period, *w.shape[1:]).roll(shift, dims=1).reshape(w.shape)


def _split_gate_up(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    gate, up = w.chunk(2, dim=-2)
    return gate.contiguous(), up.contiguous()


# -- ours -> transformers -----------------------------------------------------------------------
def _layer_to_hf(cfg: ModelConfig, sd: Tensors, src: str, dst: str, arch: str) -> Tensors:
    out: Tensors = {}
    a, t = f"{src}.self_attention", f"{dst}.self_attn"
    out[f"{dst}.input_layernorm.weight"] = sd[f"{src}.input_layernorm.weight"]
    out[f"{dst}.post_attention_layernorm.weight"] = sd[f"{src}.pre_mlp_layernorm.weight"]
    if cfg.multi_latent_attention:
        names = {"linear_q_down_proj": "q_a_proj", "q_layernorm": "q_a_layernorm", "linear_q_up_proj": "q_b_proj",
                 "linear_q_proj": "q_proj", "linear_kv_down_proj": "kv_a_proj_with_mqa",
                 "kv_layernorm": "kv_a_layernorm", "linear_kv_up_proj": "kv_b_proj", "linear_proj": "o_proj"}  # fmt: skip
        for ours, theirs in names.items():
            if f"{a}.{ours}.weight" in sd:
                out[f"{t}.{theirs}.weight"] = sd[f"{a}.{ours}.weight"]
        if cfg.dsa_indexer_n_heads:
            hd, r = cfg.dsa_indexer_head_dim, cfg.qk_pos_emb_head_dim
            i, ti = f"{a}.indexer", f"{t}.indexer"
            out[f"{ti}.wq_b.weight"] = _roll_rows(sd[f"{i}.linear_wq_b.weight"], hd, r)
            out[f"{ti}.wk.weight"] = _roll_rows(sd[f"{i}.linear_wk.weight"], hd, r)
            out[f"{ti}.k_norm.weight"] = _roll_rows(sd[f"{i}.k_norm.weight"], hd, r)
            out[f"{ti}.k_norm.bias"] = _roll_rows(sd[f"{i}.k_norm.bias"], hd, r)
            out[f"{ti}.weights_proj.weight"] = sd[f"{i}.linear_weights_proj.weight"]
    else:
        G, hd = cfg.num_query_groups or cfg.num_attention_heads, cfg.gqa_head_dim
        per = cfg.num_attention_heads // G
        for kind in ("weight", "bias") if cfg.add_qkv_bias else ("weight",):
            qkv = sd[f"{a}.linear_qkv.{kind}"]
            g = qkv.reshape(G, (per + 2) * hd, *qkv.shape[1:])
            out[f"{t}.q_proj.{kind}"] = g[:, : per * hd].reshape(-1, *qkv.shape[1:]).contiguous()
            out[f"{t}.k_proj.{kind}"] = g[:, per * hd : (per + 1) * hd].reshape(-1, *qkv.shape[1:]).contiguous()
            out[f"{t}.v_proj.{kind}"] = g[:, (per + 1) * hd :].reshape(-1, *qkv.shape[1:]).contiguous()
        if cfg.qk_layernorm:
            out[f"{t}.q_norm.weight"] = sd[f"{a}.q_layernorm.weight"]
            out[f"{t}.k_norm.weight"] = sd[f"{a}.k_layernorm.weight"]
        out[f"{t}.o_proj.weight"] = sd[f"{a}.linear_proj.weight"]
    m, tm = f"{src}.mlp", f"{dst}.mlp"
    if f"{m}.router.weight" in sd:
        out[f"{tm}.gate.weight"] = sd[f"{m}.router.weight"]
        bias = sd.get(f"{m}.router.expert_bias")
        out[f"{tm}.gate.e_score_correction_bias"] = (
            bias if bias is not None else torch.zeros(cfg.num_moe_experts, dtype=torch.float32)
        )
        w1, w2 = sd[f"{m}.experts.linear_fc1.weight"], sd[f"{m}.experts.linear_fc2.weight"]
        for e in range(w1.shape[0]):
            gate, up = _split_gate_up(w1[e])
            out[f"{tm}.experts.{e}.gate_proj.weight"] = gate
            out[f"{tm}.experts.{e}.up_proj.weight"] = up
            out[f"{tm}.experts.{e}.down_proj.weight"] = w2[e].contiguous()
        if f"{m}.shared_experts.linear_fc1.weight" in sd:
            _mlp_to_hf(sd, f"{m}.shared_experts", f"{tm}.shared_experts", out)
    else:
        _mlp_to_hf(sd, m, tm, out)
    return out


def _mlp_to_hf(sd: Tensors, src: str, dst: str, out: Tensors) -> None:
    gate, up = _split_gate_up(sd[f"{src}.linear_fc1.weight"])
    out[f"{dst}.gate_proj.weight"], out[f"{dst}.up_proj.weight"] = gate, up
    out[f"{dst}.down_proj.weight"] = sd[f"{src}.linear_fc2.weight"]


def to_hf(cfg: ModelConfig, sd: Tensors, arch: str) -> Tensors:
    """Our state dict -> transformers' checkpoint tensors (hub layout)."""
    out: Tensors = {
        "model.embed_tokens.weight": sd["embedding.word_embeddings.weight"],
        "model.norm.weight": sd["decoder.final_layernorm.weight"],
        "lm_head.weight": sd["output_layer.weight"],
    }
    for i in range(cfg.num_layers):
        out.update(_layer_to_hf(cfg, sd, f"decoder.layers.{i}", f"model.layers.{i}", arch))
    if cfg.mtp_depths:
        n = f"model.layers.{cfg.num_layers}"
        out.update(_layer_to_hf(cfg, sd, "mtp.transformer_layer", n, arch))
        out[f"{n}.enorm.weight"] = sd["mtp.enorm.weight"]
        out[f"{n}.hnorm.weight"] = sd["mtp.hnorm.weight"]
        out[f"{n}.eh_proj.weight"] = sd["mtp.eh_proj.weight"]
        out[f"{n}.shared_head.norm.weight"] = sd["mtp.final_layernorm.weight"]
        # NextN readers (vLLM, SGLang) expect their own copies; ours shares the main ones
        out[f"{n}.embed_tokens.weight"] = sd["embedding.word_embeddings.weight"].clone()
        out[f"{n}.shared_head.head.weight"] = sd["output_layer.weight"].clone()
    return {k: v.contiguous() for k, v in out.items()}


# -- transformers -> ours -----------------------------------------------------------------------
class _Take:
    """Pops tensors by name so every tensor of the HF checkpoint is accounted for."""

    def __init__(self, tensors: Tensors):
        self.left = dict(tensors)

    def __call__(self, name: str) -> torch.Tensor:
        if name not in self.left:
            raise UserError(f"Hugging Face checkpoint: missing tensor {name}")
        return self.left.pop(name)

    def has(self, name: str) -> bool:
        return name in self.left


def _layer_from_hf(cfg: ModelConfig, take: _Take, src: str, dst: str, interleaved: bool) -> Tensors:
    out: Tensors = {}
    t, a = f"{src}.self_attn", f"{dst}.self_attention"
    out[f"{dst}.input_layernorm.weight"] = take(f"{src}.input_layernorm.weight")
    out[f"{dst}.pre_mlp_layernorm.weight"] = take(f"{src}.post_attention_layernorm.weight")
    if cfg.multi_latent_attention:
        r, qh = cfg.qk_pos_emb_head_dim, cfg.qk_head_dim + cfg.qk_pos_emb_head_dim
        if cfg.q_lora_rank is None:
            q = take(f"{t}.q_proj.weight")
            out[f"{a}.linear_q_proj.weight"] = q if interleaved else _permute_rope_rows(q, qh, cfg.qk_head_dim, r)
        else:
            out[f"{a}.linear_q_down_proj.weight"] = take(f"{t}.q_a_proj.weight")
            out[f"{a}.q_layernorm.weight"] = take(f"{t}.q_a_layernorm.weight")
            q = take(f"{t}.q_b_proj.weight")
            out[f"{a}.linear_q_up_proj.weight"] = q if interleaved else _permute_rope_rows(q, qh, cfg.qk_head_dim, r)
        kv = take(f"{t}.kv_a_proj_with_mqa.weight")
        rows = cfg.kv_lora_rank + r
        out[f"{a}.linear_kv_down_proj.weight"] = kv if interleaved else _permute_rope_rows(kv, rows, cfg.kv_lora_rank, r)
        out[f"{a}.kv_layernorm.weight"] = take(f"{t}.kv_a_layernorm.weight")
        out[f"{a}.linear_kv_up_proj.weight"] = take(f"{t}.kv_b_proj.weight")
        out[f"{a}.linear_proj.weight"] = take(f"{t}.o_proj.weight")
        if cfg.dsa_indexer_n_heads:
            hd, ti, i = cfg.dsa_indexer_head_dim, f"{t}.indexer", f"{a}.indexer"
            out[f"{i}.linear_wq_b.weight"] = _roll_rows(take(f"{ti}.wq_b.weight"), hd, -r)
            out[f"{i}.linear_wk.weight"] = _roll_rows(take(f"{ti}.wk.weight"), hd, -r)
            out[f"{i}.k_norm.weight"] = _roll_rows(take(f"{ti}.k_norm.weight"), hd, -r)
            out[f"{i}.k_norm.bias"] = _roll_rows(take(f"{ti}.k_norm.bias"), hd, -r)
            out[f"{i}.linear_weights_proj.weight"] = take(f"{ti}.weights_proj.weight")
    else:
        G, hd = cfg.num_query_groups or cfg.num_attention_heads, cfg.gqa_head_dim
        per = cfg.num_attention_heads // G
        for kind in ("weight", "bias") if cfg.add_qkv_bias else ("weight",):
            q, k, v = (take(f"{t}.{p}_proj.{kind}") for p in "qkv")
            tail = q.shape[1:]
            g = torch.cat((q.reshape(G, per * hd, *tail), k.reshape(G, hd, *tail), v.reshape(G, hd, *tail)), 1)
            out[f"{a}.linear_qkv.{kind}"] = g.reshape(-1, *tail)
        if cfg.qk_layernorm:
            out[f"{a}.q_layernorm.weight"] = take(f"{t}.q_norm.weight")
            out[f"{a}.k_layernorm.weight"] = take(f"{t}.k_norm.weight")
        out[f"{a}.linear_proj.weight"] = take(f"{t}.o_proj.weight")
    m, tm = f"{dst}.mlp", f"{src}.mlp"
    if take.has(f"{tm}.gate.weight"):
        out[f"{m}.router.weight"] = take(f"{tm}.gate.weight").float()
        out[f"{m}.router.expert_bias"] = take(f"{tm}.gate.e_score_correction_bias").float()
        if take.has(f"{tm}.experts.gate_up_proj"):  # transformers' fused in-memory layout
            out[f"{m}.experts.linear_fc1.weight"] = take(f"{tm}.experts.gate_up_proj")
            out[f"{m}.experts.linear_fc2.weight"] = take(f"{tm}.experts.down_proj")
        else:
            E = cfg.num_moe_experts
            w1 = [torch.cat((take(f"{tm}.experts.{e}.gate_proj.weight"), take(f"{tm}.experts.{e}.up_proj.weight")))
                  for e in range(E)]  # fmt: skip
            out[f"{m}.experts.linear_fc1.weight"] = torch.stack(w1)
            out[f"{m}.experts.linear_fc2.weight"] = torch.stack(
                [take(f"{tm}.experts.{e}.down_proj.weight") for e in range(E)]
            )
        if cfg.moe_shared_expert_intermediate_size:
            _mlp_from_hf(take, f"{tm}.shared_experts", f"{m}.shared_experts", out)
    else:
        _mlp_from_hf(take, tm, m, out)
    return out


def _mlp_from_hf(take: _Take, src: str, dst: str, out: Tensors) -> None:
    out[f"{dst}.linear_fc1.weight"] = torch.cat((take(f"{src}.gate_proj.weight"), take(f"{src}.up_proj.weight")))
    out[f"{dst}.linear_fc2.weight"] = take(f"{src}.down_proj.weight")


def has_mtp_weights(names: list[str] | set[str], num_layers: int) -> bool:
    return any(n.startswith(f"model.layers.{num_layers}.") for n in names)


def from_hf(cfg: ModelConfig, tensors: Tensors, hf: dict) -> tuple[Tensors, list[str]]:
    """transformers' checkpoint tensors -> our state dict (float32) and notes on what was dropped."""
    take = _Take(tensors)
    interleaved = hf.get("model_type") != "deepseek_v3" or hf.get("rope_interleave", True)
    out: Tensors = {"embedding.word_embeddings.weight": take("model.embed_tokens.weight"),
                    "decoder.final_layernorm.weight": take("model.norm.weight")}  # fmt: skip
    if take.has("lm_head.weight"):
        out["output_layer.weight"] = take("lm_head.weight")
    elif hf.get("tie_word_embeddings"):
        out["output_layer.weight"] = out["embedding.word_embeddings.weight"].clone()
    else:
        raise UserError("Hugging Face checkpoint: no lm_head.weight and tie_word_embeddings is false")
    for i in range(cfg.num_layers):
        out.update(_layer_from_hf(cfg, take, f"model.layers.{i}", f"decoder.layers.{i}", interleaved))
    notes = []
    if cfg.mtp_depths:
        n = f"model.layers.{cfg.num_layers}"
        out.update(_layer_from_hf(cfg, take, n, "mtp.transformer_layer", interleaved))
        out["mtp.enorm.weight"] = take(f"{n}.enorm.weight")
        out["mtp.hnorm.weight"] = take(f"{n}.hnorm.weight")
        out["mtp.eh_proj.weight"] = take(f"{n}.eh_proj.weight")
        out["mtp.final_layernorm.weight"] = take(f"{n}.shared_head.norm.weight")
        for name, main in ((f"{n}.embed_tokens.weight", "embedding.word_embeddings.weight"),
                           (f"{n}.shared_head.head.weight", "output_layer.weight")):  # fmt: skip
            if take.has(name) and not torch.equal(take(name).to(out[main].dtype), out[main]):
                notes.append(f"{name} differs from the main model's; ours shares {main} (MTP uses that)")
    rotary = re.compile(r".*rotary_emb\.inv_freq$")  # old checkpoints carry RoPE buffers
    left = [k for k in take.left if not rotary.match(k)]
    if left:
        shown = ", ".join(sorted(left)[:10])
        raise UserError(f"Hugging Face checkpoint: {len(left)} tensors have no place in our model: {shown}")
    return {k: v.float().contiguous() for k, v in out.items()}, notes
