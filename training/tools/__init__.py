"""Tools around training that do not train: ``params`` (parameter / FLOP calculator),
``pipeline_layout`` (Megatron pipeline layout planner), ``megatron_bridge`` + ``megatron_local``
(Megatron-core config, state dict and GPTModel), ``gpu_check`` (GPTModel vs ours + the kernels
on a CUDA machine), ``optimizer_comparison`` (AdamW vs Muon vs MuonSplit on the same run)."""
