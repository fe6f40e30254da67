"""The stage runner: post-training stages in sequence in one process, each starting from the
previous stage's checkpoint — SFT -> reasoning RL -> agentic RL -> general RL -> on-policy
distillation — on the toy tasks (``python -m training.rl stages|demo``).

``config``    the stages as data (YAML: ``configs/rl_stages_*.yaml``)
``runner``    runs them: checkpoints handed on, teachers registered, bit-exact resume at stage boundaries
``episodes``  sampling episodes in this process: multi-turn, observations masked, rewards from the task
``demo``      RL on task A, RL on B, distillation recovers A: curves and a summary
"""
