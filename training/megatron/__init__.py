"""The Megatron-core trainer (``python -m training.megatron``): our shards and YAML, Megatron's engine.

``train.py`` the loop (our ``ShardLoader``, Megatron's schedule, DDP and optimizer wrapper),
``batches.py`` our batches as Megatron's inputs with document masks, ``attention.py`` the
document-masked core attention for the local MLA spec, ``optim.py`` Megatron's AdamW or our
(Split)Muon over Megatron's parameters, ``weights.py`` our initial weights onto (TP) ranks,
``checkpoint.py`` ``dist_checkpointing`` save/resume, ``cpu.py`` what stands in for CUDA on a
CPU-only torch (and the list of what still needs it).
"""
