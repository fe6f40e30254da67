"""The Megatron-core trainer: our shards and config, Megatron's model, schedule, DDP, optimizer, checkpoints.

Per step: the global batch from our ``ShardLoader`` (data-parallel ranks read their share, as in
our trainer) is cut into ``megatron.micro_batches`` micro-batches and run by Megatron's
``get_forward_backward_func()`` schedule over Megatron's ``DistributedDataParallel``-wrapped
``GPTModel`` (local spec); Megatron's ``finalize_model_grads`` all-reduces the gradients and
moves the aux-loss-free expert bias; Megatron's optimizer wrapper clips and steps (see
``optim.py``); the learning rate is ours (``lr_at``, a pure function of the step). The initial
weights are our trainer's (``training.train_config.build_model``, same seed) converted by
``megatron_bridge``, so both trainers start from the same point.

Logged per step as our trainer does: ``loss`` (= ``lm_loss`` + ``aux_loss`` (+ the MTP layers'
aux loss) + ``mtp_loss_scaling_factor`` x ``mtp_loss``), ``lm_loss`` (token mean over the global
batch), ``aux_loss`` and ``expert_load_max_over_mean`` (``moe_metrics.py``), ``mtp_loss``
(Megatron's MTP tracker, mean over depths), ``lr``, ``grad_norm``, ``tokens``, ``tokens_per_s``.
With more than one micro-batch the loss Megatron differentiates is the mean of micro-batch means
(its default, ``calculate_per_token_loss=False``); the logged ``lm_loss`` stays the token mean.
Under pipeline parallelism the last stage holds the losses and each stage its layers' aux
losses and loads: the row is summed over the stages. ``--init-from`` starts from a checkpoint's
weights (``sources.py``); ``megatron.pipeline_layout`` places the stages' contents.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from core.errors import ConfigError
from training.checkpoint import prune_checkpoints
from training.loader import ShardLoader
from training.megatron import checkpoint
from training.megatron.batches import to_microbatch
from training.megatron.build import build
from training.megatron.cpu import cpu_stand_ins
from training.megatron.moe_metrics import take_aux_loss
from training.megatron.world import World
from training.metrics_log import MetricsSink
from training.optim.schedules import lr_at
from training.train_config import TrainerConfig, load_trainer_config, resolve_stages, stage_at


def load_megatron_config(path: str | Path, overrides: list[str] | None = None) -> TrainerConfig:
    """Our trainer's YAML (``megatron:`` holds this trainer's own settings)."""
    return load_trainer_config(path, overrides)


@dataclass
class MegatronResult:
    step: int
    metrics: list[dict[str, Any]]
    model: Any  # the unwrapped Megatron GPTModel (the first chunk under an interleaved pipeline)
    checkpoint: Path | None = None
    chunks: list[Any] | None = None  # every model chunk of this rank (one per virtual pipeline stage)


def check_supported(cfg: TrainerConfig) -> None:
    """Refuse, with the reason, what this trainer does not do (rather than train something else)."""
    p, m = cfg.parallel, cfg.model
    if p.virtual_pipeline_model_parallel_size and cfg.megatron.micro_batches < p.pipeline_model_parallel_size:
        # Megatron's interleaved schedule: "The number of contiguous micro-batches in a virtual
        # pipeline stage should range in [PP, M]"
        raise ConfigError(f"megatron.micro_batches: the interleaved pipeline needs at least "
                          f"pipeline_model_parallel_size ({p.pipeline_model_parallel_size}) micro-batches")  # fmt: skip
    if cfg.megatron.experts == "grouped_gemm" and p.tensor_model_parallel_size > 1 and m.num_moe_experts:
        raise ConfigError("megatron.experts: grouped_gemm with tensor parallelism is not wired (GroupedMLP's "
                          "weight1 interleaves gate and up per TP rank)")  # fmt: skip
    if m.dsa_indexer_n_heads:
        raise ConfigError("model.dsa_indexer_n_heads: Megatron's DSAttention has no document masks or dense "
                          "warm-up here; train DSA with our trainer")  # fmt: skip
    if cfg.optimizer.qk_clip_tau:
        raise ConfigError("optimizer.qk_clip_tau: QK-clip is not wired into the Megatron trainer")
    if cfg.precision == "bf16" and not torch.cuda.is_available():
        raise ConfigError("precision: bf16 in Megatron's schedule is torch.autocast('cuda'): needs CUDA")
    if p.tensor_model_parallel_size > 1 and m.num_moe_experts and importlib.util.find_spec("apex") is None:
        # Megatron 0.16.1: MoELayer refuses TP without sequence parallelism in training ("During
        # training, performance may degrade if MoE and tensor parallelism are enabled without also
        # enabling sequence parallelism."), and the local spec's norm without Apex refuses it
        # (WrappedTorchNorm: "sequence parallel not supported by torch LayerNorm")
        raise ConfigError("parallel.tensor_model_parallel_size: MoE + TP needs sequence parallelism, which "
                          "Megatron's local-spec norm supports only with Apex (CUDA); without it TP "
                          "runs for dense models (model.num_moe_experts: null)")  # fmt: skip
    if not m.multi_latent_attention:
        raise ConfigError("model.multi_latent_attention: the Megatron trainer's local spec is built for MLA")


def train(
    cfg: TrainerConfig,
    shards: str | Path | None = None,
    metrics_path: str | Path | None = None,
    log: Callable[[str], None] = print,
    stop_after: int | None = None,
    resume: bool = True,
    init_from: str | Path | None = None,
) -> MegatronResult:
    """Train until the last stage ends (or ``stop_after`` steps in this call, then checkpoint);
    with ``resume`` and a checkpoint in ``checkpoint.dir``, continue from the latest one; else,
    with ``init_from`` (a checkpoint of ours, HF-imported ones included, or of Megatron), start
    from its weights at step 0 with a fresh optimizer. The YAML's model must fit the checkpoint's
    tensors; other fields it sets differently are logged."""
    if init_from is not None:
        cfg = _fit_model_to(cfg, init_from, log)
    check_supported(cfg)
    threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        with cpu_stand_ins():
            world = World(cfg)
            try:
                return _train(cfg, shards, metrics_path, log, stop_after, resume, world, init_from)
            finally:
                world.close()
    finally:
        torch.set_num_threads(threads)


def _fit_model_to(cfg: TrainerConfig, init_from: str | Path, log) -> TrainerConfig:
    from training.megatron.sources import differing_fields, model_config

    recorded = model_config(init_from)
    for diff in differing_fields(cfg.model, recorded):
        log(f"warning: --init-from {init_from}: model.{diff} (training with the yaml's)")
    if cfg.model.vocab_size:
        return cfg
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"vocab_size": recorded.vocab_size})})


def _train(cfg, shards, metrics_path, log, stop_after, resume, world: World, init_from=None) -> MegatronResult:
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.moe.moe_utils import clear_aux_losses_tracker
    from megatron.core.transformer.multi_token_prediction import MTPLossLoggingHelper

    stages = resolve_stages(cfg, shards)
    total = sum(s.steps for s in stages)
    if world.rank != 0:
        log = _quiet
    step, loader_state = 0, None
    ckpt_dir = Path(cfg.checkpoint.dir) if cfg.checkpoint.dir else None
    found = checkpoint.latest_checkpoint(ckpt_dir) if (ckpt_dir and resume) else None
    # a checkpoint to resume from wins: the run already started from init_from's weights
    built = build(cfg, stages, world, init_from if found is None else None)
    model_cfg, chunks, ddp, opt = built.model_cfg, built.chunks, built.ddp, built.optimizer
    if world.pp_size > 1:
        log(f"pipeline: {world.pp_size} stages x {world.vpp_size} virtual, layout {built.layout or 'even split'}")
    if init_from is not None and found is None:
        log(f"initialised from {init_from}")
    if found is not None:
        saved = checkpoint.load(found, chunks, opt)
        step, loader_state = saved["step"], saved.get("loader")
        log(f"resumed from {found} at step {step}")
    sink = MetricsSink(metrics_path if world.rank == 0 else None, append=step > 0, from_step=step,
                       tensorboard_dir=cfg.tensorboard_dir if world.rank == 0 else None, log=log)  # fmt: skip
    forward_backward = get_forward_backward_func()
    # Megatron's loss trackers are process globals: a model run earlier in this process may have left values
    if "values" in MTPLossLoggingHelper.tracker:
        MTPLossLoggingHelper.clean_loss_in_tracker()
    clear_aux_losses_tracker()
    k = cfg.megatron.micro_batches
    depths = model_cfg.mtp_depths
    metrics: list[dict[str, Any]] = []
    done_here, last_ckpt, idx, loader = 0, None, 0, None
    for d in ddp:
        d.train()
    try:
        while step < total and (stop_after is None or done_here < stop_after):
            idx, start = stage_at(stages, step)
            stage = stages[idx]
            global_batch = stage.batch_size or cfg.loader.batch_size
            if global_batch % (world.dp_size * k):
                raise ConfigError(f"loader.batch_size: {global_batch} does not split into {world.dp_size} "
                                  f"data-parallel ranks x {k} micro-batches")  # fmt: skip
            loader = ShardLoader(stage.shards, cfg.loader.model_copy(update={"batch_size": global_batch // world.dp_size}),
                                 world.dp_rank, world.dp_size)  # fmt: skip
            if loader_state is not None and loader_state.get("stage") == idx:
                loader.load_state_dict(loader_state["state"])
            batches = iter(loader)
            while step < start + stage.steps and (stop_after is None or done_here < stop_after):
                t0 = time.perf_counter()
                batch = next(batches)
                lr = lr_at(step, total, cfg.schedule, cfg.optimizer.lr)
                for group in opt.param_groups:
                    group["lr"] = lr * group.get("lr_mult", 1.0)
                    if "wd_mult" in group:  # Megatron's groups: its scheduler's rule (no decay on 1-D, biases)
                        group["weight_decay"] = cfg.optimizer.weight_decay * group["wd_mult"]
                mb = to_microbatch(batch, world.device, cfg.megatron.document_masks)
                micro = [_slice(mb, i, k) for i in range(k)]
                for d in ddp:
                    d.zero_grad_buffer()
                opt.zero_grad()
                # one iterator per model chunk (the interleaved schedule's contract); every chunk
                # reads the micro-batch for its masks, labels and positions
                data = [iter(micro) for _ in ddp] if len(ddp) > 1 else iter(micro)
                stats = forward_backward(
                    forward_step_func=_forward_step, data_iterator=data, model=ddp, num_microbatches=k,
                    seq_length=loader.seq_len, micro_batch_size=mb.tokens.shape[0] // k, forward_only=False,
                )  # fmt: skip
                _, grad_norm, _ = opt.step()
                aux = take_aux_loss(model_cfg.moe_router_load_balancing_type, model_cfg.moe_aux_loss_coeff, k,
                                    model_cfg.num_layers)  # fmt: skip
                # the last pipeline stage holds the losses, each stage its layers' aux losses: zeros
                # elsewhere, summed over the stages, then over data-parallel ranks
                lm_sum = sum((s["lm_sum"] for s in stats), torch.zeros(()))
                ntok_lm = sum((s["tokens"] for s in stats), torch.zeros((), dtype=torch.int)).float()
                sums = torch.cat([torch.stack([lm_sum, ntok_lm]), aux])
                if depths:
                    values = MTPLossLoggingHelper.tracker.get("values")
                    mtp = torch.zeros(depths)
                    if values is not None:  # the MTP block's stage
                        mtp = values.detach().cpu().clone() / k
                        MTPLossLoggingHelper.clean_loss_in_tracker()
                    sums = torch.cat([sums, mtp])
                sums = torch.cat([sums, chunks[0].config.finalize_model_grads_func.ratio_sum])
                if world.pp_size > 1:
                    dist.all_reduce(sums, group=world.ps.get_pipeline_model_parallel_group())
                if world.dp_size > 1:  # gloo has no AVG: sum, then divide
                    dist.all_reduce(sums[:-2], group=world.ps.get_data_parallel_group())
                lm, aux_loss, mtp_aux = float(sums[0] / sums[1]), *(float(x) / world.dp_size for x in sums[2:4])
                rec: dict[str, Any] = {"step": step, "lm_loss": round(lm, 6), "aux_loss": round(aux_loss, 6)}
                loss = lm + aux_loss + mtp_aux
                if depths:
                    mtp_loss = float(sums[4:-2].mean()) / world.dp_size
                    rec["mtp_loss"] = round(mtp_loss, 6)
                    loss += model_cfg.mtp_loss_scaling_factor * mtp_loss
                dt = time.perf_counter() - t0
                ntok = int(batch.tokens.numel()) * world.dp_size
                rec = {"step": step, "loss": round(loss, 6), **{k2: v for k2, v in rec.items() if k2 != "step"},
                       "lr": lr, "grad_norm": None if grad_norm is None else round(float(grad_norm), 6),
                       "expert_load_max_over_mean": _load_ratio(sums[-2:]),
                       "stage": stage.name, "seq_len": loader.seq_len, "epoch": loader.epoch, "tokens": ntok,
                       "tokens_per_s": round(ntok / dt, 1), "backend": "megatron"}  # fmt: skip
                metrics.append(rec)
                sink.write(rec)
                log(f"step {step:5d}  [{stage.name}, L={loader.seq_len}]  loss {rec['loss']:.4f}  "
                    f"lm {rec['lm_loss']:.4f}  lr {lr:.2e}  {rec['tokens_per_s']:.0f} tok/s (megatron)")  # fmt: skip
                step += 1
                done_here += 1
                loader_state = {"stage": idx, "state": loader.state_dict()}
                if ckpt_dir and cfg.checkpoint.every and step % cfg.checkpoint.every == 0:
                    last_ckpt = _save(ckpt_dir, step, chunks, opt, loader_state, cfg, built)
            loader_state = None
        if ckpt_dir and done_here and (last_ckpt is None or not last_ckpt.name.endswith(f"{step:08d}")):
            last_ckpt = _save(ckpt_dir, step, chunks, opt, {"stage": idx, "state": loader.state_dict()}, cfg, built)
    finally:
        sink.close()
    return MegatronResult(step, metrics, chunks[0], last_ckpt, chunks)


def _load_ratio(ratio_sum: torch.Tensor) -> float | None:
    total, routers = (float(x) for x in ratio_sum)
    return round(total / routers, 4) if routers else None


def _slice(mb, i: int, k: int):
    if k == 1:
        return mb
    from dataclasses import fields, replace

    b = mb.tokens.shape[0] // k
    return replace(mb, **{f.name: None if getattr(mb, f.name) is None else getattr(mb, f.name)[i * b : (i + 1) * b]
                          for f in fields(mb)})  # fmt: skip


def _forward_step(data_iterator, model):
    mb = next(data_iterator)
    per_token = model(mb.tokens, mb.position_ids, mb.attention_mask, labels=mb.labels, loss_mask=mb.mtp_loss_mask)

    def loss_func(out: torch.Tensor):
        lm_sum = (out.float() * mb.loss_mask).sum()
        n = mb.loss_mask.sum().int()
        # clones: the schedule divides the returned loss in place
        return lm_sum, n, {"lm_sum": lm_sum.detach().clone(), "tokens": n.detach().clone()}

    return per_token, loss_func


def _save(ckpt_dir: Path, step: int, chunks, opt, loader_state, cfg, built) -> Path:
    # the model as built (vocab_size resolved from the shards), so conversion needs no shards
    config = cfg.model_copy(update={"model": built.model_cfg}).model_dump(mode="json")
    path = checkpoint.save(ckpt_dir, step, chunks, opt, {"loader": loader_state, "config": config,
                                                         "pipeline_layout": built.layout})  # fmt: skip
    if dist.get_rank() == 0:  # save ends with a barrier: the new checkpoint is published on every rank
        prune_checkpoints(ckpt_dir, cfg.checkpoint.keep)
    return path


def _quiet(msg: str) -> None:
    """Log sink of ranks other than 0 (rank 0 speaks for the run)."""
