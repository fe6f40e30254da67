"""``python -m training.rl SUBCOMMAND ...``: one entry point for the RL tools.

Each subcommand is a typer app in its own module, imported only when it runs (a ``demo``
needs no HTTP server code and vice versa). Adding one is one line in ``SUBCOMMANDS``:
the module must expose ``app`` (a ``typer.Typer`` with a single command).
"""

from __future__ import annotations

import importlib
import sys

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("training.rl.stages.demo", "CPU demonstration: RL on task A, RL on B, distillation recovers A"),
    "stages": ("training.rl.stages.runner", "run SFT -> RL -> distillation stages in sequence from a config"),
    "serve": ("training.serving.rollout_server", "rollout server (OpenAI-compatible + /generate) over a checkpoint"),
    "orchestrator": ("training.rl.rollout.cli", "multi-task rollout orchestrator (registration, heartbeats)"),
    "train": ("training.rl.trainer.run", "asynchronous RL: orchestrator, rollout servers, trainer process"),
    "task-service": ("training.rl.tasks.service", "one task's instances and rewards over HTTP"),
    "gateway": ("training.rl.gateway.server", "OpenAI-compatible agent gateway recording sessions for training"),
    "export-sft": ("training.rl.export", "rejection-sampled trajectories (reward >= threshold) as SFT data"),
}


def usage() -> str:
    lines = ["usage: python -m training.rl SUBCOMMAND [OPTIONS]", "", "subcommands:"]
    width = max(len(n) for n in SUBCOMMANDS)
    lines += [f"  {name:<{width}}  {desc}" for name, (_, desc) in SUBCOMMANDS.items()]
    lines += ["", "python -m training.rl SUBCOMMAND --help shows its options"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"error: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        sys.exit(2)
    module = importlib.import_module(SUBCOMMANDS[name][0])
    module.app(args=rest, prog_name=f"python -m training.rl {name}")


if __name__ == "__main__":
    main()
