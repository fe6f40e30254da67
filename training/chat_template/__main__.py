"""``python -m training.chat_template render --messages M.jsonl --mode interleaved|preserved|turn``

Prints one JSON object per sample: ``text``, ``loss_mask`` (a list of [start, end) character
spans of trained text), ``line`` (input line, or record number in a JSON-array file) and
``sample`` (index within the conversation). Records: a message list, ``{"messages": [...],
"tools": [...]}``, ShareGPT ``{"conversations": [...]}`` or Alpaca (``formats``). Bad
conversations are counted rejects with a reason on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from core.cli import user_errors
from training.chat_template.formats import conversation_lines, conversation_of
from training.chat_template.template import MODES, Reject, render

app = typer.Typer(add_completion=False, help="GLM-5 chat template.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """GLM-5 chat template tools."""


@app.command("render")
@user_errors
def render_cmd(
    messages: Path = typer.Option(..., help="JSONL (one conversation per line) or a JSON array: OpenAI messages, ShareGPT or Alpaca"),
    mode: str = typer.Option("interleaved", help="thinking mode: interleaved | preserved | turn"),
) -> None:
    """Print one JSON object per sample: text and loss_mask (trained [start, end) character spans)."""
    from core.errors import InputError

    if mode not in MODES:
        raise InputError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not messages.is_file():
        raise InputError(f"{messages}: no such file")
    rejects: dict[str, int] = {}
    n_in = n_out = 0
    for line_no, record in conversation_lines(messages):
        n_in += 1
        try:
            if isinstance(record, Reject):  # a line that is not UTF-8 JSON
                raise record
            msgs, tools = conversation_of(record)
            samples = render(msgs, mode, tools)  # type: ignore[arg-type]
        except json.JSONDecodeError:  # raised while converting a record: counted as an unparsable line
            err = Reject("bad_json")
        except Reject as e:
            err = e
        else:
            for k, s in enumerate(samples):
                n_out += 1
                print(json.dumps({"line": line_no, "sample": k, "text": s.text, "loss_mask": [list(x) for x in s.spans]}, ensure_ascii=False))
            continue
        rejects[err.reason] = rejects.get(err.reason, 0) + 1
        print(f"reject line {line_no}: {err}", file=sys.stderr)
    summary = ", ".join(f"{k}={v}" for k, v in sorted(rejects.items())) or "none"
    print(f"conversations {n_in}: rendered {n_in - sum(rejects.values())} -> {n_out} samples; rejected: {summary}", file=sys.stderr)


if __name__ == "__main__":
    app()
