"""The RL algorithm, free of processes and I/O: what one update does with a batch of trajectories.

``losses``   group-normalised advantages, the clipped token-level policy loss (0.2 / 0.28), k3 KL, TIS
``update``   one policy update from trajectories (RL advantages or distillation teachers)
``distill``  on-policy cross-stage distillation: the teacher of each task type, its logprobs
"""
