"""The rollout side of asynchronous RL: the orchestrator that turns task services and rollout
servers into groups of trajectories for the trainer, and accounts for every one.

``orchestrator``      groups: task choice by ratio, instance, generation, observations, reward; failures as values
``groups``            a group in the making: its shared prompt and one job per trajectory
``trainer_protocol``  the trainer's HTTP side: threshold batches, commits, re-delivery, weight pushes
``registry``          registration, heartbeats, routing, managed processes and their restarts
``launch``            the command lines of managed rollout servers and task services (a seed each)
``ledger``            every issued trajectory ends in exactly one row: trained or dropped with a reason
``faults``            processes killed on purpose at configured group counts, counted
``config``            the orchestrator's YAML (``orchestrator:`` of an RL config, or standalone)
``cli``               ``python -m training.rl orchestrator``: the orchestrator alone
"""
