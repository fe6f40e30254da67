"""Rollouts in this process: batched multi-turn episodes of a stage's tasks (toy or text) through
the sampler, for any policy.

Each episode is a ``training.rl.trajectory.Trajectory``: the prompt, each model turn as sampled
(its stop token included, with its logprobs) and each environment observation between turns
(in context, masked from the loss). Rewards come from the task once the episode ends.
"""

from __future__ import annotations

import torch

from training.policy import Policy
from training.rl.tasks.build import Task
from training.rl.trajectory import Trajectory
from training.serving.sampler import SamplingParams, sample


def rollout(
    model: Policy,
    task: Task,
    problems: list,
    group_size: int,
    params: SamplingParams,
    generator: torch.Generator | None = None,
    weight_version: int = 0,
) -> list[Trajectory]:
    """``group_size`` episodes per problem, ordered group by group (group id: the problem's
    index), with rewards."""
    trajs = [
        Trajectory(f"{g}-{i}", task.name, str(g), list(p.prompt), weight_version=weight_version)
        for g, p in enumerate(problems)
        for i in range(group_size)
    ]  # fmt: skip
    problem = {t.id: problems[int(t.group)] for t in trajs}
    live = list(range(len(trajs)))
    for _ in range(task.max_turns):
        if not live:
            break
        outs = sample(model, [trajs[i].tokens for i in live], params, generator)
        nxt = []
        for i, out in zip(live, outs, strict=True):
            t = trajs[i]
            t.add_turn(out.tokens, out.logprobs, [weight_version] * len(out.tokens))
            t.finish_reason = out.finish_reason
            obs = task.observe(problem[t.id], out.tokens) if out.finish_reason == "stop" else None
            if obs:
                t.add_observation(obs)
                nxt.append(i)
        live = nxt
    # a task that grades in environments (code: one container per reply) grades many at once
    batch = getattr(task, "rewards", None)
    rewards = batch([(problem[t.id], t.turns) for t in trajs]) if batch else [task.reward(problem[t.id], t.turns) for t in trajs]
    for t, r in zip(trajs, rewards, strict=True):
        p = problem[t.id]
        t.reward = r
        if getattr(p, "messages", None):  # a text task: the unified message list, as the orchestrator keeps it
            t.messages = [*p.messages, *(task.codec.chat_reply(turn) for turn in t.turns)]
    return trajs
