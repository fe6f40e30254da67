"""``python -m swe_envs session ...``: environment sessions on the command line."""

from __future__ import annotations

from pathlib import Path

import typer

from core.cli import user_errors

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Environment sessions: SWE instances and Harbor tasks as containers tool calls run in.")


@app.command()
@user_errors(sigterm_unwinds=True)
def run(
    policy: str = typer.Option(..., help="gold (the reference patch / solve.sh through the tools), nop (submit at "
                                         "once) or scripted:FILE.jsonl ({id, tool_calls: [{name, arguments}]})"),
    output: Path = typer.Option(..., help="folder for trajectories.jsonl (one row per instance or task)"),
    instances: Path = typer.Option(None, help="SWE instances JSONL: validate's validated.jsonl or SWE-bench rows"),
    repos: Path = typer.Option(None, help="with --instances: clones or git bundles (owner__name.bundle), as validate"),
    tasks: Path = typer.Option(None, help="a Harbor task directory, or a directory of them"),
    config: Path = typer.Option(None, help="SweEnvsConfig YAML (--instances) or TerminalConfig YAML (--tasks)"),
) -> None:
    """Open a session per instance or task, replay the policy's tool calls in it, verify, close."""
    from swe_envs.sessions.run import run as run_sessions

    rows = run_sessions(policy, output, instances=instances, repos=repos, tasks=tasks, config=config, log=typer.echo)
    scored = [r["reward"] for r in rows if r.get("reward") is not None]
    typer.echo(f"{len(rows)} session(s), mean reward {sum(scored) / max(1, len(scored)):.3f} over {len(scored)} "
               f"verified -> {output / 'trajectories.jsonl'}")
