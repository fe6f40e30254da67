"""The GLM-5-shaped model, with Megatron-core's config names and weight layouts.

    config    ModelConfig (one YAML for ours, the calculator and Megatron) and its checks
    glm       GLMModel: dense then MoE decoder layers, shared-parameter MTP
    mla       multi-latent attention (+ latent KV cache); gqa: grouped-query attention (GLM-4.5)
    moe       dropless MoE: sigmoid router with expert bias, grouped-GEMM experts, shared expert
    dsa       DeepSeek sparse attention (lightning indexer + top-k)
    doc_mask  document masking and positions for packed sequences
    tiny_lm   the small dense LM of ``training.train_loop``
"""
