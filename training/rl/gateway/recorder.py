"""One agent session through the gateway, recorded token-in/token-out.

Every chat call of the session is matched against what the session has recorded: when its messages
are the previous call's messages plus the reply the gateway returned plus new ``tool``/``user``
messages, only the new messages are rendered (``Codec.observation``: the tool results and the next
generation prompt) and appended to the token context, so the model's earlier turns stay exactly the
ids it sampled — the agent's copy of them (text, possibly reformatted) is never re-tokenised. A call
that does not extend the record (the agent rewrote or summarised its history, changed its tools)
starts a new segment from a fresh render of its messages; each segment is one training trajectory.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from training.rl.trajectory import Trajectory


def _calls(m: dict) -> list[tuple[str, Any]]:
    out = []
    for c in m.get("tool_calls") or []:
        fn = (c or {}).get("function") or {}
        args = fn.get("arguments") or "{}"
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            pass
        out.append((fn.get("name"), args))
    return out


def same_message(a: dict, b: dict) -> bool:
    """Equal as the template sees them (role, stripped text, tool calls by name and arguments):
    an SDK echoes a reply back with ids, nulls and its own field order."""
    return (a.get("role") == b.get("role") and str(a.get("content") or "").strip() == str(b.get("content") or "").strip()
            and str(a.get("reasoning_content") or "").strip() == str(b.get("reasoning_content") or "").strip()
            and _calls(a) == _calls(b))


@dataclass
class Segment:
    traj: Trajectory
    tools: Any
    seen: list[dict] = field(default_factory=list)  # the agent's messages so far + the replies returned


class Recording:
    """The calls of one agent session (``task``, ``group``: what the trainer groups it with)."""

    def __init__(self, sid: str, task: str, group: str, codec, thinking: bool = False):
        self.sid, self.task, self.group, self.codec, self.thinking = sid, task, group, codec, thinking
        self.segments: list[Segment] = []
        self.calls = 0
        self.lock = threading.Lock()  # one call at a time: the context of call k+1 is call k's result
        self.finished = False

    def context(self, messages: list[dict], tools: Any, thinking: bool) -> list[int]:
        """The token ids to generate from for this call (recording a new segment when needed)."""
        seg = self.segments[-1] if self.segments else None
        if seg is not None and seg.tools == tools and self._extends(seg, messages):
            new = messages[len(seg.seen):]
            ids = self._continue(seg.traj, new, thinking)
            if ids is not None:
                seg.traj.add_observation(ids)  # tool results / user turns: context, never trained
                seg.seen = list(messages)
                seg.traj.messages = [dict(m) for m in messages]
                return seg.traj.tokens
        prompt = self.codec.chat_prompt(messages, thinking=thinking, tools=tools or None)
        traj = Trajectory(f"gw-{self.sid}-{len(self.segments)}", self.task, self.group, prompt,
                          messages=[dict(m) for m in messages])
        self.segments.append(Segment(traj, tools, list(messages)))
        return traj.tokens

    def _extends(self, seg: Segment, messages: list[dict]) -> bool:
        n = len(seg.seen)
        return (len(messages) > n and all(same_message(a, b) for a, b in zip(seg.seen, messages[:n], strict=False))
                and all(m.get("role") in ("tool", "user") for m in messages[n:]))

    def _continue(self, traj: Trajectory, new: list[dict], thinking: bool) -> list[int] | None:
        """Ids of the new messages after the last sampled turn, or None when they cannot follow it
        as the template would (``after_turn`` of the model's codec: GLM-5's or its own template's)."""
        return self.codec.after_turn(traj.output_ids[-1] if traj.output_ids else None, new, thinking)

    def record(self, output_ids: list[int], logprobs: list[float], versions: list[int], finish: str,
               reply: dict) -> None:
        seg = self.segments[-1]
        seg.traj.add_turn(output_ids, logprobs, versions)  # sampled: trained
        seg.traj.finish_reason = finish
        seg.traj.messages.append(reply)
        seg.seen.append(reply)
        self.calls += 1

    def trajectories(self, reward: float, info: dict | None = None) -> list[Trajectory]:
        """The finished session's segments with a model turn, each rewarded with the session's reward."""
        out = []
        for seg in self.segments:
            if seg.traj.turns:
                seg.traj.reward = float(reward)
                seg.traj.reward_info = dict(info or {}, session=self.sid, segments=len(self.segments))
                out.append(seg.traj)
        return out
