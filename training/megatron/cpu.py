"""What stands in for CUDA when Megatron-core runs on a CPU-only torch (gloo ranks).

Megatron-core 0.16.1 trains on CPU through its own code except for a few places that name the
GPU outright. Measured on this machine (CPU-only torch 2.x, gloo), each raises
``AssertionError: Torch not compiled with CUDA enabled``:

* ``pipeline_parallel/schedules.py`` (``forward_backward_no_pipelining`` and both pipelined
  schedules): ``total_num_tokens = torch.zeros([], dtype=torch.int, device="cuda")``;
* ``optimizer/optimizer.py`` ``FP32Optimizer.__init__``: ``self._scale = torch.tensor([1.0],
  device='cuda')`` (the loss scale of an fp32 run, always 1);
* ``optimizer/clip_grads.py`` ``clip_grad_by_total_norm_fp32``: ``assert param.grad.type() ==
  'torch.cuda.FloatTensor'`` (a bare ``AssertionError``) and a ``device='cuda'`` overflow buffer;
* ``dist_checkpointing/strategies/filesystem_async.py`` ``preload_tensors`` (every torch_dist
  save): ``torch.cuda.synchronize()`` after the device-to-host copies;
* ``RotaryEmbedding``, the DDP grad buffers (``param_and_grad_buffer.py``), the MTP and MoE
  loss trackers, the pipeline's send/receive buffers: ``device=torch.cuda.current_device()``;
* ``LanguageModule.setup_embeddings_and_output_layer`` under pipeline parallelism (the first
  stage's embedding and the last stage's copy, for the output layer or MTP, start equal):
  ``weight.data = weight.data.cuda()`` before its all-reduce.

Five stand-ins cover all of them, active only inside ``cpu_stand_ins()`` and only where CUDA
is absent: ``torch.cuda.current_device()`` answers ``"cpu"``; ``torch.cuda.synchronize()`` is a
no-op (there is no device queue to wait for); ``Tensor.cuda()`` returns the tensor (it is where
Megatron's code runs); a ``TorchFunctionMode`` turns a
literal ``device="cuda"`` given to a tensor factory (``zeros``/``ones``/``empty``/``tensor``/
``full``/``arange``) into the CPU; and the optimizer's ``clip_grad_by_total_norm_fp32`` is
``clip_grads_fp32_on_cpu`` below (the same scaling, ``max_norm / (total_norm + 1e-6)`` when
below 1, accepting fp32 CPU gradients). Nothing else of Megatron is replaced: its GPTModel, DDP
wrapper (grad buffers, ``finalize_model_grads``), FP32 optimizer wrapper (torch ``AdamW``: no
Apex / Transformer Engine fused Adam here), schedules and ``dist_checkpointing`` run as
shipped. What still needs CUDA (not reached here): the all-to-all token dispatcher
(``torch.cuda.Stream``; the allgather dispatcher is used on CPU), ``overlap_grad_reduce``
(a CUDA communication stream), the distributed optimizer with NCCL user buffers, bf16 autocast
in the schedule (``torch.autocast("cuda")``), Transformer Engine specs and fused kernels.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.overrides import TorchFunctionMode

_FACTORIES = {torch.zeros, torch.ones, torch.empty, torch.tensor, torch.full, torch.arange, torch.zeros_like,
              torch.ones_like, torch.empty_like}  # fmt: skip


def _is_cuda(device) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, int)  # a bare index means a CUDA ordinal


class _CudaFactoriesOnCpu(TorchFunctionMode):
    """Tensor factories asked for ``device="cuda"`` build on the CPU instead."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FACTORIES and _is_cuda(kwargs.get("device")):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


@torch.no_grad()
def clip_grads_fp32_on_cpu(parameters, max_norm, total_norm, use_decoupled_grad: bool = False) -> None:
    """Megatron's ``clip_grad_by_total_norm_fp32`` without its CUDA-type assertion."""
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    attr = "decoupled_grad" if use_decoupled_grad else "grad"
    grads = [getattr(p, attr) for p in parameters if getattr(p, attr, None) is not None]
    if any(g.dtype not in (torch.float32, torch.bfloat16) for g in grads):
        raise TypeError("clip_grads_fp32_on_cpu: fp32/bf16 gradients expected")
    clip_coeff = max_norm / (total_norm + 1.0e-6)
    if clip_coeff < 1.0 and grads:
        torch._foreach_mul_(grads, clip_coeff)


def _no_device_queue(device=None) -> None:
    """``torch.cuda.synchronize`` without CUDA: CPU work is already done when it returns."""


def _stay_on_cpu(self: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """``Tensor.cuda`` without CUDA: the tensor stays where Megatron's CPU run keeps everything."""
    return self


@contextlib.contextmanager
def cpu_stand_ins() -> Iterator[bool]:
    """Run Megatron on the CPU (yields True) or, with CUDA present, unchanged (yields False)."""
    if torch.cuda.is_available():
        yield False
        return
    import megatron.core.optimizer.optimizer as megatron_optimizer

    real, real_sync, real_to_cuda = torch.cuda.current_device, torch.cuda.synchronize, torch.Tensor.cuda
    real_clip = megatron_optimizer.clip_grad_by_total_norm_fp32
    torch.cuda.current_device = lambda: "cpu"
    torch.cuda.synchronize = _no_device_queue
    torch.Tensor.cuda = _stay_on_cpu
    megatron_optimizer.clip_grad_by_total_norm_fp32 = clip_grads_fp32_on_cpu
    try:
        with _CudaFactoriesOnCpu():
            yield True
    finally:
        torch.cuda.current_device, torch.cuda.synchronize, torch.Tensor.cuda = real, real_sync, real_to_cuda
        megatron_optimizer.clip_grad_by_total_norm_fp32 = real_clip
