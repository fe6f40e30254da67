"""Reinforcement learning for the GLM-5-shaped model (post-training), by role.

``trajectory``  the one ``Trajectory`` from sampling to update (token-in/token-out; its payload is its fields)
``algo/``       the algorithm: group-wise losses, the policy update, on-policy distillation
``tasks/``      what is rolled out and rewarded: toy tasks, task backends (``swe``/``terminal``: multi-turn
                environment sessions), the task service
``stages/``     the stage runner: SFT -> RL stages -> distillation in sequence in one process, the demo
``rollout/``    asynchronous RL's rollout side: orchestrator, registry, ledger, faults, trainer protocol
``trainer/``    asynchronous RL's trainer side: the run's supervisor and the trainer process
``gateway/``    the agent gateway: external agents' OpenAI-SDK sessions recorded as trajectories
``export``      rejection-sampled trajectories as SFT data

Rollout servers and the sampler live in ``training.serving``, which imports nothing from here.
``python -m training.rl`` lists every subcommand.
"""

from pathlib import Path

# the shipped YAML (configs/rl_*.yaml): the CLIs' default configs, found from any working directory
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
