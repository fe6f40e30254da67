"""Our grouped GEMM as the experts of Megatron's MoE layer (``megatron.experts: grouped_gemm``).

``grouped_gemm_experts_class()`` is Megatron-core 0.16.1's ``GroupedMLP`` with its two GEMMs
replaced by ours: ``moe_kernels.grouped_gemm.grouped_gemm`` (Triton) where the kernel can run (a
CUDA tensor, or Triton's interpreter when ``TRITON_INTERPRET=1`` was set before triton was
imported: tests), else ``moe_kernels.reference.grouped_gemm``, its pure-torch reference with the same
signature (the CPU path). Everything else is Megatron's: the MoE layer, router and dispatcher
around it, and ``GroupedMLP``'s parameters and ``sharded_state_dict`` — ``weight1`` [h, E*2f]
holding [E, h, 2f] (fc1 rows [gate; up], transposed) and ``weight2`` [E*f, h] holding [E, f, h],
which is exactly our grouped GEMM's ``w [E, K, N]``, and dist checkpoints whose per-expert
tensors carry ``SequentialMLP``'s keys, so a checkpoint of either loads into the other
(``convert.py`` reads ours through ``SequentialMLP``).

Why not Megatron's own ``GroupedMLP``: it needs the CUDA-only ``grouped_gemm`` package (its
``__init__`` asserts it) and asserts ``config.bf16`` in ``forward``; on CPU Megatron's own experts
are ``SequentialMLP`` (one MLP per expert), which the parity test compares with. Not wired here
(refused when built): activation recompute of the experts (``moe_act``), ``moe_apply_probs_on_input``,
expert tensor parallelism (``weight1``'s TP slices interleave gate and up per rank).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import torch
import torch.nn.functional as F


def gemm_for(x: torch.Tensor) -> tuple[str, Callable]:
    """(name, function) of the grouped GEMM for tensors like ``x``: the Triton kernel where it runs."""
    if x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        from moe_kernels.grouped_gemm import grouped_gemm

        return "triton", grouped_gemm
    from moe_kernels.reference import grouped_gemm

    return "reference", grouped_gemm


@contextlib.contextmanager
def _without_grouped_gemm_package() -> Iterator[None]:
    """``GroupedMLP.__init__`` asserts the CUDA ``grouped_gemm`` package only because its forward
    calls it; ours does not."""
    import megatron.core.transformer.moe.experts as experts

    real = experts.gg
    experts.gg = SimpleNamespace(assert_grouped_gemm_is_available=lambda: None)
    try:
        yield
    finally:
        experts.gg = real


def grouped_gemm_experts_class():
    from megatron.core.transformer.moe.experts import GroupedMLP

    class GroupedGemmExperts(GroupedMLP):
        """Megatron's ``GroupedMLP`` on our grouped GEMM (see the module doc)."""

        def __init__(self, num_local_experts, config, pg_collection=None):
            if config.moe_apply_probs_on_input or "moe_act" in (config.recompute_modules or []):
                raise ValueError("megatron.experts=grouped_gemm: moe_apply_probs_on_input and moe_act "
                                 "recompute are not wired")  # fmt: skip
            with _without_grouped_gemm_package():
                super().__init__(num_local_experts, config, pg_collection)
            if self.tp_group.size() > 1:
                raise ValueError("megatron.experts=grouped_gemm: expert tensor parallelism is not wired")
            self.kernel = None  # "triton" or "reference" once a forward ran

        def forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
            x = permuted_local_hidden_states
            if torch.is_autocast_enabled(x.device.type):  # autocast does not reach a custom kernel
                x = x.to(torch.get_autocast_dtype(x.device.type))
            self.kernel, gemm = gemm_for(x)
            counts = tokens_per_expert.to(x.device)  # the kernel reads the offsets on the device
            w1 = self.weight1.view(self.num_local_experts, self.config.hidden_size, -1)
            w2 = self.weight2.view(self.num_local_experts, -1, self.config.hidden_size)
            gate, up = gemm(x, w1.to(x.dtype), counts).chunk(2, dim=-1)
            # SequentialMLP's order of operations: activation, then the routing weight, then fc2
            h = (F.silu(gate) * up * permuted_probs.unsqueeze(-1)).to(x.dtype)
            return gemm(h, w2.to(x.dtype), counts), None

    return GroupedGemmExperts


_PER_EXPERT = re.compile(r"(.*\.experts\.)local_experts\.(\d+)\.linear_fc([12])\.weight")


def stack_expert_weights(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``SequentialMLP``'s per-expert weights (``local_experts.e.linear_fc1/2.weight``, [out, in])
    -> ``GroupedMLP``'s ``weight1`` / ``weight2`` (rows: the experts' transposes, stacked)."""
    out: dict[str, torch.Tensor] = {}
    per: dict[tuple[str, str], dict[int, torch.Tensor]] = {}
    for name, t in sd.items():
        m = _PER_EXPERT.fullmatch(name)
        if m is None:
            out[name] = t
        else:
            per.setdefault((m.group(1), m.group(3)), {})[int(m.group(2))] = t
    for (prefix, fc), experts in per.items():
        stacked = torch.stack([experts[e].t() for e in range(len(experts))])  # [E, in, out]
        h = stacked.shape[1] if fc == "1" else stacked.shape[2]
        out[f"{prefix}weight{fc}"] = stacked.reshape(h, -1) if fc == "1" else stacked.reshape(-1, h)
    return out


def expert_views(chunks) -> dict[int, tuple[int, int, int]]:
    """id(param) -> the [experts, in, out] view of a ``GroupedMLP`` weight in ``chunks`` (modules),
    so Muon orthogonalises each expert's matrix (as ours and ``SequentialMLP``'s do), not the
    stack as one matrix."""
    from megatron.core.transformer.moe.experts import GroupedMLP

    out = {}
    for m in (m for chunk in chunks for m in chunk.modules() if isinstance(m, GroupedMLP)):
        h = m.config.hidden_size
        out[id(m.weight1)] = (m.num_local_experts, h, -1)
        out[id(m.weight2)] = (m.num_local_experts, -1, h)
    return out
