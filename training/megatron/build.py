"""The Megatron model a run trains: its chunks (one per virtual pipeline stage), DDP wrappers, optimizer.

Our model's initial weights (``training.train_config.build_model``, same seed, or ``init_from``'s:
a checkpoint of ours or of Megatron) are converted by ``megatron_bridge`` into each chunk.
Without an interleaved pipeline a rank holds one chunk; with ``virtual_pipeline_model_parallel_size``
V it holds V, chunk v being virtual stage v (``GPTModel(vp_stage=v)``), each in its own Megatron
``DistributedDataParallel`` (bucketing only for the first, as Megatron-LM's ``get_model`` does),
one optimizer over all of them. Which layer spec (``megatron.spec``: Transformer Engine's where
it imports, else the local one) and which experts (``megatron.experts``) are chosen here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from core.errors import ConfigError
from training.checkpoint import load_checkpoint
from training.megatron import checkpoint
from training.megatron.world import World
from training.model.config import ModelConfig
from training.train_config import TrainerConfig, build_model


@dataclass
class Built:
    model_cfg: ModelConfig  # the model as built (vocab size resolved)
    chunks: list[Any]  # GPTModel per virtual pipeline stage on this rank
    ddp: list[Any]  # their DistributedDataParallel wrappers
    optimizer: Any
    layout: str | None  # Megatron's pipeline_model_parallel_layout (None: no pipeline or its even split)


def spec_kind(cfg: TrainerConfig) -> str:
    """``megatron.spec``: "te" (Transformer Engine's layer specs) or "local" (Megatron's own modules)."""
    from training.tools.megatron_local import have_transformer_engine

    spec = cfg.megatron.spec
    if spec == "auto":
        return "te" if have_transformer_engine() else "local"
    if spec == "te" and not have_transformer_engine():
        raise ConfigError("megatron.spec: te needs transformer_engine, which is not importable here (use auto)")
    return spec


def experts_class(cfg: TrainerConfig):
    """The MoE layers' experts module: Megatron's own (None: the spec's) or our grouped GEMM."""
    if cfg.megatron.experts == "megatron" or not cfg.model.num_moe_experts:
        return None
    from training.megatron.experts import grouped_gemm_experts_class

    return grouped_gemm_experts_class()


def build(cfg: TrainerConfig, stages, world: World, init_from: str | Path | None = None) -> Built:
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import finalize_model_grads

    from training.megatron.attention import document_masked_attention_class
    from training.megatron.moe_metrics import LoadReader
    from training.megatron.optim import build_optimizer
    from training.megatron.sources import resolve
    from training.megatron.weights import load_our_weights
    from training.tools.megatron_bridge import build_megatron_model

    ours = build_model(cfg, stages)  # our trainer's initial weights (same seed, same vocab rule)
    kind, init_step = resolve(init_from) if init_from is not None else (None, None)
    if kind == "ours":  # refuses a checkpoint of another shape, listing the tensors
        load_checkpoint(init_step, ours)
    dispatcher = cfg.megatron.token_dispatcher
    if dispatcher == "auto":
        dispatcher = "alltoall" if torch.cuda.is_available() else "allgather"
    spec, experts, p = spec_kind(cfg), experts_class(cfg), cfg.parallel
    layout = _layout(cfg, ours.cfg, stages)
    chunks = []
    for vp in range(world.vpp_size):
        chunks.append(build_megatron_model(
            ours.cfg, spec, core_attention=document_masked_attention_class(), experts=experts,
            vp_stage=vp if world.vpp_size > 1 else None, use_cpu_initialization=world.device.type == "cpu",
            moe_token_dispatcher_type=dispatcher,  # perform_initialization stays on: it sets the TP attributes
            tensor_model_parallel_size=world.tp_size, expert_model_parallel_size=world.ep_size,
            pipeline_model_parallel_size=world.pp_size, virtual_pipeline_model_parallel_size=p.virtual_pipeline_model_parallel_size,
            pipeline_model_parallel_layout=layout,
            # precision bf16 = ours: autocast over fp32 master weights (Megatron's schedule enters
            # torch.autocast("cuda") per forward); residual activations, so stage-to-stage tensors, stay fp32
            pipeline_dtype=torch.float32, enable_autocast=cfg.precision == "bf16", autocast_dtype=torch.bfloat16,
            # Megatron refuses MoE + TP in training without it ("performance may degrade ...")
            sequence_parallel=world.tp_size > 1 and bool(cfg.model.num_moe_experts),
        ))  # fmt: skip
    for meg in chunks:
        load_our_weights(meg, ours.cfg, ours.state_dict(), world.tp_rank, world.tp_size, world.ep_rank, world.ep_size, spec)
    if kind == "megatron":  # Megatron reshards it onto this run's layout
        checkpoint.load_weights(init_step, chunks)
    chunks = [meg.to(world.device) for meg in chunks]
    ddp = [DistributedDataParallel(meg.config, DistributedDataParallelConfig(), meg, disable_bucketing=i > 0)
           for i, meg in enumerate(chunks)]  # fmt: skip
    config = chunks[0].config  # the schedule reads the first chunk's
    config.finalize_model_grads_func = LoadReader(finalize_model_grads)  # + the step's expert loads
    config.no_sync_func = [d.no_sync for d in ddp] if len(ddp) > 1 else ddp[0].no_sync
    opt = build_optimizer(ddp, ours.cfg, ours.up_proj_blocks(), cfg.optimizer, cfg.grad_clip)
    return Built(ours.cfg, chunks, ddp, opt, layout)


def _layout(cfg: TrainerConfig, model_cfg: ModelConfig, stages) -> str | None:
    """Megatron's ``pipeline_model_parallel_layout``: the YAML's, or (``plan``) the planner's for
    this model, sequence length and (virtual) pipeline size; None without pipeline parallelism."""
    p = cfg.parallel
    layout = cfg.megatron.pipeline_layout
    if p.pipeline_model_parallel_size == 1 or layout != "plan":
        return layout if p.pipeline_model_parallel_size > 1 else None
    from core.shards import read_manifest
    from training.tools.pipeline_layout import plan

    seq_len = max(read_manifest(s.shards).seq_len for s in stages)
    vpp = p.virtual_pipeline_model_parallel_size or 1
    return plan(model_cfg, p.pipeline_model_parallel_size, vpp, p.expert_model_parallel_size, seq_len).layout
