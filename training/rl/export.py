"""``python -m training.rl export-sft``: rejection-sampled trajectories as SFT data (GLM-5 builds its agent
SFT data this way).

Reads trajectory JSONL — ``swe_envs session run``'s ``trajectories.jsonl``, the agent gateway's, or
``Trajectory`` payloads — and keeps the rows whose ``reward`` is at least ``--min-reward`` (a row
without a reward, an error row, is never kept). Each kept row becomes ``{"id", "messages", "tools",
"reward"}``, the OpenAI-messages format ``training.sft`` reads (``datasets: [{path, category:
coding_agent, min_reward}]``): the unified message list up to the model's last turn (what the
environment said after it trains nothing), tool-call ids kept so results match their calls, and
the tools the policy was offered (a row's own ``tools``, else the session tools). The template's
loss mask then trains exactly the model's turns — thinking, tool calls, their ending token — and
never the instruction or an observation.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import typer

from core.cli import user_errors
from core.errors import UserError
from core.io import read_jsonl


def sft_row(row: dict[str, Any], default_tools: list[dict] | None) -> dict[str, Any] | None:
    msgs = row.get("messages")
    if not isinstance(msgs, list):
        return None
    last = max((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "assistant"), default=-1)
    if last < 0:
        return None
    return {"id": row.get("id"), "messages": msgs[: last + 1], "tools": row.get("tools") or default_tools,
            "reward": row["reward"]}


def export(paths: list[Path], out: Path, min_reward: float, tools: str = "sessions") -> Counter:
    """Write the kept rows to ``out``; counts of kept and of each reason a row was left out."""
    default_tools = None
    if tools == "sessions":
        from swe_envs.sessions.tools import TOOLS

        default_tools = TOOLS
    elif tools != "none":
        raise UserError(f"--tools: sessions or none, not {tools!r}")
    counts: Counter = Counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for path in paths:
            for row in read_jsonl(path, "trajectories"):
                reward = row.get("reward") if isinstance(row, dict) else None
                if not isinstance(reward, (int, float)) or isinstance(reward, bool):
                    counts["no_reward"] += 1
                    continue
                if reward < min_reward:
                    counts["below_min_reward"] += 1
                    continue
                kept = sft_row(row, default_tools)
                if kept is None:
                    counts["no_model_turn"] += 1
                    continue
                fh.write(json.dumps(kept, ensure_ascii=False) + "\n")
                counts["kept"] += 1
    tmp.replace(out)  # a half-written file never stands as the dataset
    return counts


app = typer.Typer(add_completion=False, help="Rejection-sampled trajectories as SFT data (training.sft's format).")


@app.command()
@user_errors
def main(
    trajectories: list[Path] = typer.Option(..., help="trajectory JSONL (session run, gateway, or Trajectory payloads)"),
    output: Path = typer.Option(Path("out/agent_sft.jsonl"), help="SFT JSONL to write"),
    min_reward: float = typer.Option(1.0, help="keep rows whose reward is at least this"),
    tools: str = typer.Option("sessions", help="tools of rows that name none: sessions (bash, editor, submit) or none"),
) -> None:
    """Keep the trajectories with reward >= --min-reward and write them as OpenAI-messages SFT rows."""
    for p in trajectories:
        if not p.is_file():
            raise UserError(f"--trajectories: not a file: {p}")
    counts = export(trajectories, output, min_reward, tools)
    typer.echo(f"kept {counts['kept']} of {sum(counts.values())} trajectories -> {output} "
               f"(left out: {dict((k, v) for k, v in counts.items() if k != 'kept') or 'none'})")
