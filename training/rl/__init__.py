"""Reinforcement learning for the GLM-5-shaped model (post-training).

Modules, one concern each:
``sampler``      batched token-in/token-out sampling with the MLA latent KV cache
``losses``       group-normalised advantages, the clipped token-level policy loss, KL, TIS
``distill``      on-policy cross-stage distillation (per-token teacher advantages)
``toy_tasks``    verifiable toy tasks with programmatic rewards
``stages``       the SFT -> reasoning RL -> agentic RL -> general RL -> distillation pipeline
``demo``         the CPU demonstration (``python -m training.rl demo --out OUT``)
"""
