"""The Megatron-core trainer (``python -m training.megatron``): our shards and YAML, Megatron's engine.

``train.py`` the loop (our ``ShardLoader``, Megatron's schedule, DDP and optimizer wrapper),
``build.py`` the model chunks (one per virtual pipeline stage), their DDP wrappers and optimizer,
``world.py`` torch.distributed and Megatron's parallel state, ``experts.py`` our grouped GEMM as the
MoE layer's experts, ``batches.py`` our batches as Megatron's inputs with document masks, ``attention.py`` the
document-masked core attention for the local MLA spec, ``optim.py`` Megatron's AdamW or our
(Split)Muon over Megatron's parameters, ``weights.py`` our initial weights onto (TP) ranks,
``checkpoint.py`` ``dist_checkpointing`` save/resume, ``convert.py`` checkpoints Megatron <-> ours
(``python -m training.megatron convert``), ``sources.py`` which trainer wrote a checkpoint,
``moe_metrics.py`` aux loss and expert load for the metrics rows, ``options.py`` the
``megatron:`` YAML section, ``cpu.py`` what stands in for CUDA on a CPU-only torch (and what
still needs it).

Modes measured on CPU (gloo) against our trainer (tests/training/megatron/, docs/megatron.md):
one process (AdamW, MuonSplit: |lm_loss| diff <= 1e-6 over 8 steps), data parallel under
torchrun, TP=2 for dense models (AdamW, MuonSplit), EP=2, PP=2 (planned layout, MTP on the last
stage), PP=2 x VPP=2 (interleaved), micro-batches > 1, dist checkpoint resume (bit-exact, PP and VPP
included), conversion to ours and back, our grouped-GEMM experts.
Refused with the reason (``train.check_supported``): MoE + TP without Apex (Megatron requires
sequence parallelism there and its torch norm refuses it), the interleaved pipeline with fewer
micro-batches than stages, DSA, QK-clip, bf16 without CUDA.
"""
