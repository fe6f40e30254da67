"""Our model's weights into a Megatron ``GPTModel``, on any tensor-parallel rank.

``megatron_bridge.to_megatron_state_dict`` renames our full tensors to Megatron's names. A
tensor-parallel rank holds a slice of each tensor-parallel parameter: Megatron marks those
with ``tensor_model_parallel`` and ``partition_dim``, and the slice is the rank's contiguous
chunk along that dim (heads for the MLA up-projections, so every rank holds whole heads),
except SwiGLU's ``linear_fc1``, whose local weight is [gate chunk; up chunk]. The same
parameters are how ``optim.TPMuon`` reassembles a full matrix. An expert-parallel rank holds
``num_moe_experts / ep`` whole experts, global ``ep_rank * E_local + i`` as its
``local_experts.i`` (Megatron's ``SequentialMLP``; ``linear_fc1.weight{i}`` under the TE spec),
stacked into ``weight1`` / ``weight2`` for our grouped-GEMM experts (``experts.py``). A pipeline stage holds its decoder layers
numbered from 0 (``TransformerLayer.layer_number`` is the global one, from 1): ``global_names``
maps its parameter names to the whole model's, which the bridge and MuonSplit's blocks use.
"""

from __future__ import annotations

import re

import torch

from training.megatron.experts import stack_expert_weights
from training.model.config import ModelConfig
from training.tools.megatron_bridge import Spec, to_megatron_state_dict

# an expert's global number in Megatron's names: SequentialMLP's local_experts.N, TEGroupedMLP's weightN
_EXPERT_NUMBER = re.compile(r"(.*\.local_experts\.)(\d+)(\..*)|(.*\.experts\.linear_fc[12]\.weight)(\d+)()")


def is_tp_sharded(p: torch.Tensor) -> bool:
    return bool(getattr(p, "tensor_model_parallel", False)) and getattr(p, "partition_dim", -1) >= 0


def is_glu_fc1(name: str, cfg_gated: bool) -> bool:
    return cfg_gated and name.endswith("linear_fc1.weight")


def local_slice(full: torch.Tensor, dim: int, rank: int, size: int, glu: bool) -> torch.Tensor:
    """This rank's part of a full tensor (Megatron's column/row/vocab-parallel layouts)."""
    if size == 1:
        return full
    if glu:  # [gate; up] -> [gate_r; up_r]
        gate, up = full.chunk(2, dim=dim)
        return torch.cat([gate.chunk(size, dim=dim)[rank], up.chunk(size, dim=dim)[rank]], dim=dim)
    return full.chunk(size, dim=dim)[rank]


def full_from_slices(parts: list[torch.Tensor], dim: int, glu: bool) -> torch.Tensor:
    """Inverse of ``local_slice`` over all ranks' parts (rank order)."""
    if not glu:
        return torch.cat(parts, dim=dim)
    halves = [p.chunk(2, dim=dim) for p in parts]
    return torch.cat([h[0] for h in halves] + [h[1] for h in halves], dim=dim)


def global_names(meg: torch.nn.Module) -> dict[str, str]:
    """This stage's parameter and buffer names -> the names they have in the whole model."""
    offsets = {}
    decoder = getattr(meg, "decoder", None)
    for i, layer in enumerate(decoder.layers if decoder is not None else []):
        offsets[f"decoder.layers.{i}."] = f"decoder.layers.{layer.layer_number - 1}."
    out = {}
    for name, _ in list(meg.named_parameters()) + list(meg.named_buffers()):
        m = re.match(r"decoder\.layers\.\d+\.", name)
        out[name] = offsets[m.group(0)] + name[m.end() :] if m else name
    return out


def local_experts(sd: dict[str, torch.Tensor], num_experts: int, ep_rank: int, ep_size: int) -> dict[str, torch.Tensor]:
    """``sd`` (global expert numbers) with only this expert-parallel rank's experts, renumbered locally."""
    if ep_size == 1:
        return sd
    per_rank = num_experts // ep_size
    out = {}
    for name, t in sd.items():
        m = _EXPERT_NUMBER.fullmatch(name)
        if m is None:
            out[name] = t
            continue
        head, number, tail = (g for g in m.groups() if g is not None)
        if ep_rank * per_rank <= int(number) < (ep_rank + 1) * per_rank:
            out[f"{head}{int(number) - ep_rank * per_rank}{tail}"] = t
    return out


@torch.no_grad()
def load_our_weights(meg: torch.nn.Module, cfg: ModelConfig, ours: dict[str, torch.Tensor], tp_rank: int = 0,
                     tp_size: int = 1, ep_rank: int = 0, ep_size: int = 1, spec: Spec = "local") -> None:  # fmt: skip
    """Copy our full state dict into ``meg`` (this TP rank's slices, this EP rank's experts, this
    pipeline stage's layers); every Megatron parameter and buffer must be written (``_extra_state``
    aside), every tensor of ours used (by some stage)."""
    sd = local_experts(to_megatron_state_dict(cfg, ours, spec), cfg.num_moe_experts or 0, ep_rank, ep_size)
    names = global_names(meg)
    targets = {names[n]: t for n, t in list(meg.named_parameters()) + list(meg.named_buffers())}
    if any(n.endswith(".experts.weight1") for n in targets):  # our grouped-GEMM experts
        sd = stack_expert_weights(sd)
    whole = getattr(meg, "pre_process", True) and getattr(meg, "post_process", True)
    # _extra_state: TE/fp8 metadata; local_tokens_per_expert: the step's load counter (zero at start)
    missing = [k for k in targets if k not in sd and not k.endswith(("_extra_state", "local_tokens_per_expert"))]
    unused = [k for k in sd if k not in targets] if whole else []
    if missing or unused:
        raise ValueError(f"Megatron model and converted weights disagree: missing {missing[:5]}, unused {unused[:5]}")
    for name, t in targets.items():
        if name not in sd:
            continue
        src = sd[name]
        if is_tp_sharded(t):
            src = local_slice(src, t.partition_dim, tp_rank, tp_size, is_glu_fc1(name, True))
        if src.shape != t.shape:
            raise ValueError(f"{name}: converted {tuple(src.shape)} vs Megatron's {tuple(t.shape)} (tp {tp_size})")
        t.copy_(src.to(t.dtype))
