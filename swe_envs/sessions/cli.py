"""``python -m swe_envs session ...``: environment sessions on the command line."""

from __future__ import annotations

from pathlib import Path

import typer

from core.cli import user_errors

ENGINE_HELP = ("a Docker engine to place sessions on (DOCKER_HOST URL, URL=N for a bound of N sessions), "
               "repeatable: least-loaded first; default: this process's engine")
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
    engine: list[str] = typer.Option(None, help=ENGINE_HELP),
) -> None:
    """Open a session per instance or task, replay the policy's tool calls in it, verify, close."""
    from swe_envs.sessions.run import run as run_sessions

    rows = run_sessions(policy, output, instances=instances, repos=repos, tasks=tasks, config=config, log=typer.echo,
                        engines=engine)
    scored = [r["reward"] for r in rows if r.get("reward") is not None]
    typer.echo(f"{len(rows)} session(s), mean reward {sum(scored) / max(1, len(scored)):.3f} over {len(scored)} "
               f"verified -> {output / 'trajectories.jsonl'}")


@app.command()
@user_errors(sigterm_unwinds=True)
def serve(
    port: int = typer.Option(8010, help="port to listen on (0: any free one)"),
    host: str = typer.Option("127.0.0.1", help="address to bind"),
    instances: Path = typer.Option(None, help="SWE instances JSONL the clients may open, by instance_id"),
    repos: Path = typer.Option(None, help="with --instances: clones or git bundles, as validate"),
    tasks: Path = typer.Option(None, help="Harbor task directory (or a directory of them) the clients may open"),
    output: Path = typer.Option(Path("out/sessions"), help="verifier logs and evaluation folders"),
    config: Path = typer.Option(None, help="SweEnvsConfig YAML (--instances) or TerminalConfig YAML (--tasks)"),
    max_sessions: int = typer.Option(8, min=1, help="sessions open at once per engine (429 past every bound)"),
    idle_timeout: float = typer.Option(900.0, help="seconds without a call before a session is reaped"),
    max_lifetime: float = typer.Option(7200.0, help="seconds a session may live at most"),
    engine: list[str] = typer.Option(None, help=ENGINE_HELP),
    warm: int = typer.Option(0, min=0, help="sessions of an instance/task kept started ahead of its next open"),
) -> None:
    """Serve sessions over HTTP: POST /sessions, /sessions/ID/step, /sessions/ID/verify; DELETE /sessions/ID."""
    from swe_envs.sessions.hosts import Hosts
    from swe_envs.sessions.pool import SessionPool
    from swe_envs.sessions.run import openers
    from swe_envs.sessions.service import make_server

    hosts = Hosts.from_specs(engine, max_sessions)
    typer.echo(f"removed {hosts.sweep()} container(s) of killed processes", err=True)
    opens, refused = openers(instances, repos, tasks, output.absolute(), config, log=lambda m: typer.echo(m, err=True))
    for why in refused:
        typer.echo(f"refused: {why}", err=True)
    pool = SessionPool(opens, max_sessions, idle_timeout, max_lifetime, hosts=hosts, warm=warm)
    server = make_server(pool, host, port)
    typer.echo(f"serving {len(opens)} task(s)/instance(s) on http://{host}:{server.server_address[1]}", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        pool.shutdown()
