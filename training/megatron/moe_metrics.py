"""``aux_loss`` and ``expert_load_max_over_mean`` for the Megatron trainer's metrics rows, as ours logs them.

* ``expert_load_max_over_mean``: for each router with an expert bias (decoder and MTP layers),
  the step's tokens per expert summed over the tensor- and data-parallel ranks (the counts the
  aux-loss-free bias update uses), max / mean; the mean over routers (ours:
  ``GLMModel.update_expert_bias``). Megatron's ``finalize_model_grads`` moves the bias and then
  zeroes the counts, so ``LoadReader`` wraps it and reads them first. Under pipeline
  parallelism each stage holds its own routers: the sums are added over the pipeline ranks.
* ``aux_loss``: Megatron's load-balancing loss tracker holds each layer's loss divided by its
  coefficient, summed over micro-batches, decoder layers first, then the MTP layers; times
  ``moe_aux_loss_coeff``, summed over the decoder layers and divided by the micro-batches it is
  ours (the sum over the main model's MoE layers of coefficient x sequence aux loss). The MTP
  layers' part is not in ``aux_loss`` but is in ``loss``, as ours counts it. 0 with
  ``moe_router_load_balancing_type: none`` (the shipped default).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

# Megatron's tracker names for the load-balancing types ours implements
AUX_NAMES = {"seq_aux_loss": "seq_load_balancing_loss", "aux_loss": "load_balancing_loss"}


class LoadReader:
    """``finalize_model_grads`` that first records the step's expert loads."""

    def __init__(self, finalize: Callable):
        self.finalize = finalize
        self.ratio_sum = torch.zeros(2)  # [sum of max/mean over this rank's routers, routers]

    def __call__(self, model, *args, **kwargs):
        from megatron.core import parallel_state as ps

        loads = [m.local_tokens_per_expert.detach().float().clone() for chunk in model for m in chunk.modules()
                 if getattr(m, "expert_bias", None) is not None]  # fmt: skip
        self.ratio_sum = torch.zeros(2)
        if loads:
            stacked = torch.stack(loads)
            dist.all_reduce(stacked, group=ps.get_tensor_and_data_parallel_group())
            used = stacked[stacked.sum(-1) > 0]
            self.ratio_sum = torch.stack([(used.max(-1).values / used.mean(-1)).sum(), torch.tensor(float(len(used)))])
        return self.finalize(model, *args, **kwargs)


def take_aux_loss(load_balancing_type: str, coeff: float, micro_batches: int, num_layers: int) -> torch.Tensor:
    """This rank's aux loss of the step, [decoder layers, MTP layers], and the tracker cleared."""
    from megatron.core.transformer.moe.moe_utils import (
        clear_aux_losses_tracker,
        get_moe_layer_wise_logging_tracker,
    )

    tracker = get_moe_layer_wise_logging_tracker()
    name = AUX_NAMES.get(load_balancing_type)
    aux = torch.zeros(2)
    if name in tracker and tracker[name].get("values") is not None:
        per_layer = tracker[name]["values"].detach().float().cpu() * coeff / micro_batches
        aux = torch.stack([per_layer[:num_layers].sum(), per_layer[num_layers:].sum()])
    clear_aux_losses_tracker()
    return aux
