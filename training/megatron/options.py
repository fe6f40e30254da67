"""The Megatron trainer's own settings: the ``megatron:`` section of the trainer YAML.

Kept apart from ``train.py`` (which imports Megatron-core and our trainer) so our trainer's
config can carry the section without importing either.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from core.config import StrictModel


class MegatronOptions(StrictModel):
    micro_batches: int = Field(default=1, gt=0)  # per optimizer step and data-parallel rank
    # allgather runs on CPU; alltoall needs CUDA (it creates a torch.cuda.Stream)
    token_dispatcher: Literal["auto", "allgather", "alltoall"] = "auto"
    document_masks: bool = True  # block-diagonal attention per document (see batches.py)
    # pipeline stages' contents, Megatron's pipeline_model_parallel_layout ("Ett|ttmL"): "plan" =
    # training.tools.pipeline_layout's plan for this model (MTP placed by cost); null = Megatron's
    # even split of the decoder layers (embedding first, MTP and loss on the last stage)
    pipeline_layout: str | None = None
    # layer specs: te = Transformer Engine's (where transformer_engine imports), local = Megatron's
    # own modules; auto = te where it imports, else local
    spec: Literal["auto", "local", "te"] = "auto"
    # the MoE layers' experts: Megatron's own (the spec's: SequentialMLP locally, TEGroupedMLP
    # with TE) or grouped_gemm = our kernels' grouped GEMM in Megatron's GroupedMLP (experts.py)
    experts: Literal["megatron", "grouped_gemm"] = "megatron"
