"""Reinforcement learning for the GLM-5-shaped model (post-training).

Modules, one concern each:
``sampler``      batched token-in/token-out sampling with the MLA latent KV cache
``rollouts``     multi-turn episodes recorded token-in/token-out, the agentic mask, append-only check
``losses``       group-normalised advantages, the clipped token-level policy loss, KL, TIS
``update``       one policy update from trajectories (RL advantages or distillation teachers)
``distill``      on-policy cross-stage distillation (per-token teacher advantages)
``toy_tasks``    verifiable toy tasks with programmatic rewards
``stages``       the SFT -> reasoning RL -> agentic RL -> general RL -> distillation pipeline
                 (its config: ``stage_config``)
``demo``         the CPU demonstration (``python -m training.rl demo --out OUT``)

The asynchronous side (rollout servers, orchestrator, async trainer, ledger, task services,
fault injection) builds on these; ``python -m training.rl`` lists every subcommand.
"""
