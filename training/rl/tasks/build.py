"""The tasks of a stages config (``training.rl.stages``): token-level toy tasks for a model made
from scratch on their own vocabulary, or text tasks for a policy with a tokenizer and chat template.

The two do not mix: a toy task's ids mean nothing to a real tokenizer, and a text task needs one
to render its prompt and read the reply.
"""

from __future__ import annotations

from core.errors import ConfigError
from training.rl.tasks.arithmetic import ArithmeticTask, ArithmeticTaskConfig
from training.rl.tasks.code import CodeTask, CodeTaskConfig
from training.rl.tasks.toy import ToyTask, ToyTaskConfig

TaskConfig = ToyTaskConfig | ArithmeticTaskConfig | CodeTaskConfig
Task = ToyTask | ArithmeticTask | CodeTask


def is_text(cfg: TaskConfig) -> bool:
    return isinstance(cfg, ArithmeticTaskConfig | CodeTaskConfig)


def build_tasks(cfgs: dict[str, TaskConfig], codec=None) -> dict[str, Task]:
    """Tasks by name; ``codec``: the policy's (None for a model on the toy vocabulary)."""
    if not cfgs:
        raise ConfigError("tasks: at least one task is needed")
    out: dict[str, Task] = {}
    for name, c in cfgs.items():
        if is_text(c):
            if codec is None:
                raise ConfigError(f"tasks.{name}: a text task needs a policy with a tokenizer "
                                  "(model: {hf: PATH} or {checkpoint: PATH} with a tokenizer.json)")
            out[name] = CodeTask(name, c, codec) if isinstance(c, CodeTaskConfig) else ArithmeticTask(name, c, codec)
        elif codec is not None:
            raise ConfigError(f"tasks.{name}: toy tasks speak their own 23-token vocabulary; with a "
                              "tokenizer's model use a text task (kind: arithmetic or code)")
        else:
            out[name] = ToyTask(name, c)
    return out
