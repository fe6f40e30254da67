"""torch.distributed and Megatron's ``parallel_state`` for one Megatron run (or a conversion)."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

from training.train_config import TrainerConfig


class World:
    """torch.distributed + Megatron's parallel_state for this run (a gloo world of 1 when not under torchrun)."""

    def __init__(self, cfg: TrainerConfig, cpu: bool = False):
        from megatron.core import parallel_state as ps

        cuda = torch.cuda.is_available() and not cpu  # cpu: checkpoint conversion, on any machine
        self.created = not dist.is_initialized()
        if self.created:
            backend = "nccl" if cuda else "gloo"
            if "WORLD_SIZE" in os.environ:  # torchrun
                dist.init_process_group(backend)
            else:  # one process: a world of 1 on loopback
                dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
        p = cfg.parallel
        ps.initialize_model_parallel(p.tensor_model_parallel_size, p.pipeline_model_parallel_size,
                                     virtual_pipeline_model_parallel_size=p.virtual_pipeline_model_parallel_size,
                                     expert_model_parallel_size=p.expert_model_parallel_size)  # fmt: skip
        if cuda:
            from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            model_parallel_cuda_manual_seed(cfg.seed)
        self.ps = ps
        self.dp_rank, self.dp_size = ps.get_data_parallel_rank(), ps.get_data_parallel_world_size()
        self.tp_rank, self.tp_size = ps.get_tensor_model_parallel_rank(), ps.get_tensor_model_parallel_world_size()
        self.ep_rank, self.ep_size = ps.get_expert_model_parallel_rank(), ps.get_expert_model_parallel_world_size()
        self.pp_size = ps.get_pipeline_model_parallel_world_size()
        self.vpp_size = p.virtual_pipeline_model_parallel_size or 1  # model chunks per pipeline rank
        self.rank = dist.get_rank()
        self.device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")

    def close(self) -> None:
        self.ps.destroy_model_parallel()
        if self.created:
            dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
