"""The tools an agent calls inside an environment session: ``bash``, ``str_replace_editor``, ``submit``.

The schemas are OpenAI function tools (what the GLM-5 chat template renders as ``<tool_call>`` blocks
and an OpenAI-SDK agent sends as ``tool_calls``). Every call runs inside the session's container
(``Workspace``): nothing an agent sends runs on the host. Observations are capped
(``max_observation_chars``, head and tail kept) and end with the exit code, as a shell shows it.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from typing import Any, Protocol

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a bash command in the environment; returns its output and exit code.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string"}, "timeout": {"type": "number", "description": "seconds"}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "str_replace_editor",
        "description": "View, create or edit a file: command view (path, view_range), create (path, file_text), "
                       "str_replace (path, old_str, new_str; old_str must occur exactly once), insert (path, "
                       "insert_line, new_str).",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert"]},
            "path": {"type": "string"}, "file_text": {"type": "string"}, "old_str": {"type": "string"},
            "new_str": {"type": "string"}, "insert_line": {"type": "integer"},
            "view_range": {"type": "array", "items": {"type": "integer"}}},
            "required": ["command", "path"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Finish: the environment's tests decide the reward.",
        "parameters": {"type": "object", "properties": {}}}},
]


class Workspace(Protocol):
    def exec(self, command: str, timeout_s: float) -> tuple[int, str, bool]: ...  # (rc, output, timed out)
    def container(self): ...  # the docker Container the files live in


@dataclass
class Observation:
    text: str
    done: bool = False  # submit was called
    error: bool = False  # the call itself was malformed or failed


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-limit // 2:]


def read_file(ws: Workspace, path: str, limit: int = 8 * 2**20) -> str | None:
    try:
        stream, _ = ws.container().get_archive(path)
    except Exception:  # docker.errors.NotFound / APIError: no such file
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        return tar.extractfile(member).read(limit).decode("utf-8", "replace") if member else None


def write_file(ws: Workspace, path: str, text: str) -> None:
    parent, name = path.rsplit("/", 1) if "/" in path.strip("/") else ("/", path.strip("/"))
    ws.exec(f"mkdir -p {shlex.quote(parent or '/')}", 60)
    data = text.encode("utf-8")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    ws.container().put_archive(parent or "/", buf.getvalue())


def _editor(ws: Workspace, args: dict[str, Any], limit: int) -> Observation:
    cmd, path = args.get("command"), str(args.get("path") or "")
    if not path.startswith("/"):
        return Observation(f"error: path must be absolute, got {path!r}", error=True)
    if cmd == "create":
        write_file(ws, path, str(args.get("file_text") or ""))
        return Observation(f"File created: {path}")
    text = read_file(ws, path)
    if text is None:
        rc, out, _ = ws.exec(f"ls -la {shlex.quote(path)} 2>&1 | head -50", 30) if cmd == "view" else (1, "", False)
        if cmd == "view" and rc == 0 and out.strip():  # a directory
            return Observation(cap(out, limit))
        return Observation(f"error: {path} does not exist", error=True)
    lines = text.splitlines(keepends=True)
    if cmd == "view":
        lo, hi = (args.get("view_range") or [1, len(lines)])[:2]
        hi = len(lines) if hi in (-1, None) else hi
        shown = "".join(f"{i:6}\t{line}" for i, line in enumerate(lines[lo - 1:hi], lo))
        return Observation(cap(shown, limit))
    if cmd == "str_replace":
        old, new = str(args.get("old_str") or ""), str(args.get("new_str") or "")
        count = text.count(old) if old else 0
        if count != 1:
            return Observation(f"error: old_str occurs {count} times in {path} (must be exactly once)", error=True)
        write_file(ws, path, text.replace(old, new, 1))
        return Observation(f"Edited {path}")
    if cmd == "insert":
        at = int(args.get("insert_line") or 0)
        if not 0 <= at <= len(lines):
            return Observation(f"error: insert_line {at} outside 0..{len(lines)}", error=True)
        new = str(args.get("new_str") or "")
        write_file(ws, path, "".join(lines[:at]) + new + ("" if new.endswith("\n") else "\n") + "".join(lines[at:]))
        return Observation(f"Inserted at line {at} of {path}")
    return Observation(f"error: unknown editor command {cmd!r}", error=True)


def run_tool(ws: Workspace, name: str, arguments: str | dict, max_chars: int = 8000,
             default_timeout_s: float = 120.0, max_timeout_s: float = 600.0) -> Observation:
    """One tool call; a malformed call is an error observation, never an exception."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        return Observation(f"error: the arguments are not a JSON object: {err}", error=True)
    if not isinstance(args, dict):
        return Observation("error: the arguments are not a JSON object", error=True)
    if name == "submit":
        return Observation("submitted", done=True)
    if name == "bash":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return Observation("error: bash needs a non-empty 'command'", error=True)
        timeout = min(float(args.get("timeout") or default_timeout_s), max_timeout_s)
        rc, out, timed_out = ws.exec(command, timeout)
        return Observation(f"{cap(out, max_chars)}\n[exit code {rc}{', timed out' if timed_out else ''}]")
    if name == "str_replace_editor":
        return _editor(ws, args, max_chars)
    return Observation(f"error: unknown tool {name!r} (have bash, str_replace_editor, submit)", error=True)
