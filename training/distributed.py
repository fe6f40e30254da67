"""Data + expert parallelism for the trainer under ``torchrun``, on PyTorch's own engine.

``torchrun --nproc-per-node N -m training.trainer ...`` sets ``WORLD_SIZE``; ``from_env`` then
joins the process group (NCCL with CUDA, gloo on CPU) and lays the N ranks out as a
``[N / ep, ep]`` device mesh (``ep`` = ``parallel.expert_model_parallel_size``):

* data parallelism over all N ranks: every rank reads its own slice of each global batch
  (``ShardLoader(rank, world)``; ``loader.batch_size`` is the GLOBAL batch), and every
  non-expert parameter is sharded with FSDP2 (``fully_shard``), which all-gathers weights for
  the forward pass and reduce-scatters (averages) gradients;
* expert parallelism inside each row of ``ep`` ranks: rank r owns experts
  ``[r*E/ep, (r+1)*E/ep)`` and tokens travel to them by ``all_to_all``
  (``training/expert_parallel.py``); those weights are left out of FSDP. Their gradient on a
  rank already sums the contributions of every token of its ``ep`` row, so it is summed over
  the ``N / ep`` replicas and divided by N — the same mean-over-ranks gradient FSDP gives the
  rest (each rank's loss is the mean over its own tokens, as in Megatron's default).

The model is first built whole with the run's seed on every rank, so any N and ep start from
the single-process weights. Muon orthogonalizes full matrices: a sharded gradient is
all-gathered, orthogonalized (every rank does the same work) and re-sliced (``training/optim/muon.py``).
Checkpoints are ``torch.distributed.checkpoint`` directories (``training/dist_checkpoint.py``)
whose tensors carry their global shapes, so a run resumes on a different N or ep.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard

from core.errors import ConfigError
from training.model.glm import GLMModel


def is_expert_param(name: str) -> bool:
    return ".mlp.experts.linear_fc" in name


@dataclass
class Parallel:
    rank: int
    world: int
    ep: int
    device: torch.device
    mesh: DeviceMesh  # [world / ep, ep], dims ("edp", "ep")
    dp_mesh: DeviceMesh  # all ranks, 1-D: FSDP's mesh

    @property
    def group(self) -> dist.ProcessGroup:
        return dist.group.WORLD

    @property
    def ep_group(self) -> dist.ProcessGroup | None:
        return self.mesh.get_group("ep") if self.ep > 1 else None

    @property
    def edp_group(self) -> dist.ProcessGroup:
        return self.mesh.get_group("edp")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- model ------------------------------------------------------------------------------------
    def expert_range(self, num_experts: int) -> tuple[int, int]:
        per = num_experts // self.ep
        r = self.mesh.get_local_rank("ep")
        return r * per, (r + 1) * per

    def shard(self, full: GLMModel) -> GLMModel:
        """This rank's part of ``full`` (built identically on every rank): its experts, then
        FSDP2 over everything else, per decoder layer (one all-gather per layer in flight)."""
        model = full
        if self.ep > 1:
            model = GLMModel(full.cfg, ep_group=self.ep_group)
            lo, hi = self.expert_range(full.cfg.num_moe_experts)
            state = {k: (v[lo:hi] if is_expert_param(k) else v) for k, v in full.state_dict().items()}
            model.load_state_dict(state)
        model.to(self.device)
        experts = {p for n, p in model.named_parameters() if is_expert_param(n)} if self.ep > 1 else set()
        blocks = list(model.decoder.layers) + ([model.mtp] if model.mtp is not None else [])
        for block in blocks:
            fully_shard(block, mesh=self.dp_mesh, ignored_params=experts & set(block.parameters()) or None)
        fully_shard(model, mesh=self.dp_mesh, ignored_params=experts or None)
        return model

    def expert_dtensor(self, t: torch.Tensor) -> DTensor:
        """An expert-parallel local tensor [E/ep, ...] as the global [E, ...] it is a slice of."""
        return DTensor.from_local(t, self.mesh, [Replicate(), Shard(0)], run_check=False)

    # -- gradients --------------------------------------------------------------------------------
    @torch.no_grad()
    def finish_expert_grads(self, model: torch.nn.Module) -> None:
        """Expert gradients -> the mean over all ranks' losses (see the module docstring)."""
        if self.ep == 1:
            return
        for name, p in model.named_parameters():
            if is_expert_param(name) and p.grad is not None:
                if self.world > self.ep:
                    dist.all_reduce(p.grad, group=self.edp_group)
                p.grad.div_(self.world)

    @torch.no_grad()
    def clip_grad_norm_(self, model: torch.nn.Module, max_norm: float) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_`` over the whole (sharded) model: the global norm of
        all gradients, each element counted once."""
        sq = torch.zeros((), dtype=torch.float32, device=self.device)
        grads = []
        for name, p in model.named_parameters():
            g = p.grad
            if g is None:
                continue
            grads.append(g)
            if isinstance(g, DTensor):  # FSDP shards are disjoint across ranks
                sq += g.to_local().float().pow(2).sum()
            elif is_expert_param(name) and self.ep > 1:  # replicated over the world/ep rows
                sq += g.float().pow(2).sum() * (self.ep / self.world)
            else:  # replicated everywhere
                sq += g.float().pow(2).sum() / self.world
        dist.all_reduce(sq)
        norm = sq.sqrt()
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            (g.to_local() if isinstance(g, DTensor) else g).mul_(coef)
        return norm

    def mean(self, values: dict[str, torch.Tensor]) -> dict[str, float]:
        """Per-rank scalars -> their mean over ranks (one all-reduce)."""
        keys = sorted(values)
        t = torch.stack([values[k].detach().float().to(self.device) for k in keys])
        dist.all_reduce(t)
        return {k: float(v) / self.world for k, v in zip(keys, t.tolist(), strict=True)}

    def max(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t)

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def from_env(tensor_parallel: int, pipeline_parallel: int, expert_parallel: int) -> Parallel | None:
    """Join the process group when launched by torchrun (WORLD_SIZE set), else None."""
    if "WORLD_SIZE" not in os.environ:
        return None
    if tensor_parallel != 1 or pipeline_parallel != 1:
        raise ConfigError(
            "parallel.tensor_model_parallel_size / pipeline_model_parallel_size: our trainer does data "
            "and expert parallelism only; tensor/pipeline parallelism is Megatron's (training/tools/megatron_bridge.py)"
        )
    cuda = torch.cuda.is_available()
    world = int(os.environ["WORLD_SIZE"])
    if world % expert_parallel:
        raise ConfigError(
            f"parallel.expert_model_parallel_size: {expert_parallel} does not divide the {world} ranks"
        )
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    mesh = init_device_mesh(
        device.type, (world // expert_parallel, expert_parallel), mesh_dim_names=("edp", "ep")
    )
    dp_mesh = init_device_mesh(device.type, (world,), mesh_dim_names=("dp",))
    return Parallel(dist.get_rank(), world, expert_parallel, device, mesh, dp_mesh)


def global_batch_split(global_batch: int, world: int) -> int:
    if global_batch % world:
        raise ConfigError(
            f"loader.batch_size: the global batch {global_batch} is not divisible by {world} ranks"
        )
    return global_batch // world
