"""SFT data: read chat datasets, render them with the GLM-5 template, fit them to the context,
mix categories by weight, tokenize with loss masks.

Inputs (JSONL, one conversation per line, or one JSON array): OpenAI messages (a list, or
``{"messages": [...], "tools": [...]}``, extra keys ignored), ShareGPT (``{"conversations": [...]}``)
and Alpaca (``training.chat_template.formats``); or a
directory of terminal-agent trials (``swe_envs terminal run`` output: each trial's
``agent/trajectory.json`` with the reward from its ``result.json``). Each dataset names its category (chat / reasoning /
coding_agent, or any name); a record may be filtered by its ``reward`` (``min_reward``, for
agent trajectories). Every line ends as samples or as a counted reject with a reason.

Context rule (never silent truncation): in the clear-thinking modes each user turn is its own
sample (earlier turns are untrained context); one longer than ``max_context`` tokens drops its
oldest history turns, whole, until it fits (leading system messages and tools always kept;
counted as ``history_turns_dropped``), and is rejected as ``longer_than_max_context`` when
the trained turn does not fit even alone. In preserved mode the conversation is split at
user-turn boundaries into consecutive windows, each as many whole turns as fit (system
messages and tools repeated in every window); a turn that does not fit alone is rejected as
``turn_longer_than_max_context`` and the windows around it are kept.

Mixing: category c gets ``round(total * w_c / sum(w))`` samples (``total`` defaults to the
number of samples available), drawn without replacement while it has enough, repeated
(whole passes, then a seeded draw) when its share exceeds what it has.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from training.chat_template import MODES, Mode, Reject, conversation_of, encode, normalize, render
from training.chat_template.formats import conversation_lines


class DatasetConfig(StrictModel):
    path: str
    category: str = "chat"
    min_reward: float | None = None  # keep only records whose "reward" is at least this


class DataConfig(StrictModel):
    datasets: list[DatasetConfig]
    # category -> mixture weight (categories not listed weigh 1)
    weights: dict[str, float] = {}
    mode: str = "interleaved"  # thinking mode: interleaved | preserved | turn
    max_context: int = Field(default=202_752, gt=1)  # GLM-5's SFT context; tiny configs set less
    total_samples: int | None = Field(default=None, gt=0)  # size of the mixture
    seed: int = 0

    def check(self) -> DataConfig:
        if self.mode not in MODES:
            raise InputError(f"data.mode: must be one of {', '.join(MODES)}, got {self.mode!r}")
        return self


@dataclass
class Tokenized:
    tokens: list[int]
    mask: list[int]
    category: str


@dataclass
class ReadReport:
    conversations: int = 0
    samples: Counter = field(default_factory=Counter)  # per category, before mixing
    rejects: Counter = field(default_factory=Counter)  # per reason
    mixed: Counter = field(default_factory=Counter)  # per category, after mixing
    trimmed: Counter = field(default_factory=Counter)  # history turns dropped to fit the context

    def as_dict(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "samples": dict(self.samples),
                "rejects": dict(self.rejects), "mixed": dict(self.mixed), "trimmed": dict(self.trimmed)}  # fmt: skip


def read_records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed record, or a ``Reject`` with its reason for a line that is not UTF-8
    JSON). A directory is read as Harbor trial output (``swe_envs terminal run``): every
    ``*/agent/trajectory.json`` message list with the ``reward`` of its trial's ``result.json``."""
    if path.is_dir():
        for no, traj in enumerate(sorted(path.glob("*/agent/trajectory.json")), 1):
            try:
                messages = json.loads(traj.read_text(encoding="utf-8"))
                result_path = traj.parent.parent / "result.json"
                result = json.loads(result_path.read_text(encoding="utf-8")) if result_path.is_file() else {}
                yield no, {"messages": messages, "reward": result.get("reward")}
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                yield no, Reject("bad_trajectory", f"{traj.parent.parent.name}: unreadable trajectory.json or result.json")
        return
    if not path.is_file():
        raise InputError(f"{path}: no such dataset file or trial directory")
    yield from conversation_lines(path)


def fit_to_context(
    msgs: list[dict], tools: Any, mode: Mode, tok, max_context: int, rejects: Counter, trimmed: Counter | None = None
):
    """Samples of one conversation as (tokens, mask), by the context rule above."""
    users = [i for i, m in enumerate(msgs) if m["role"] == "user"]
    head = [m for m in msgs[: users[0]] if m["role"] == "system"]
    turns = [msgs[u : (users[k + 1] if k + 1 < len(users) else len(msgs))] for k, u in enumerate(users)]
    out = []
    if mode != "preserved":
        trained = [k for k, t in enumerate(turns) if any(m["role"] == "assistant" for m in t)]
        for k, s in zip(trained, render(msgs, mode, tools), strict=True):
            ids, mask = encode(s, tok)
            j = 0
            while len(ids) > max_context and j < k:  # drop the oldest history turns (context only)
                j += 1
                ids, mask = encode(render(head + [m for t in turns[j : k + 1] for m in t], mode, tools)[-1], tok)
            if len(ids) > max_context:
                rejects["longer_than_max_context"] += 1
                continue
            if j and trimmed is not None:
                trimmed["history_turns_dropped"] += j
            out.append((ids, mask))
        return out
    ids, mask = encode(render(msgs, mode, tools)[0], tok)
    if len(ids) <= max_context:
        return [(ids, mask)]

    def window(a: int, b: int):
        body = [m for t in turns[a:b] for m in t]
        if not any(m["role"] == "assistant" for m in body):
            return None
        return encode(render(head + body, mode, tools)[0], tok)

    a = 0
    while a < len(turns):
        best = None  # ((ids, mask), end turn) of the longest window from turn a that fits
        for b in range(a + 1, len(turns) + 1):
            w = window(a, b)
            if w is not None:
                if len(w[0]) > max_context:
                    break
                best = (w, b)
        if best is None:
            rejects["turn_longer_than_max_context"] += 1
            a += 1
            continue
        out.append(best[0])
        a = best[1]
    return out


def conversations(ds, report: ReadReport) -> Iterator[tuple[list[dict], list]]:
    """(normalized messages, tools) of each record of dataset ``ds`` that is admitted; every other line
    counted in ``report`` as a conversation and a reject with its reason."""
    for _no, record in read_records(Path(ds.path)):
        report.conversations += 1
        if isinstance(record, Reject):  # not UTF-8 JSON
            report.rejects[record.reason] += 1
            continue
        if ds.min_reward is not None:  # a record without a reward (a bare message list too) fails it
            reward = record.get("reward") if isinstance(record, dict) else None
            if not isinstance(reward, (int, float)) or reward < ds.min_reward:
                report.rejects["below_min_reward"] += 1
                continue
        try:
            msgs, tools = conversation_of(record)
            msgs = normalize(msgs)
        except Reject as err:
            report.rejects[err.reason] += 1
            continue
        yield msgs, tools


def tokenized_samples(cfg: DataConfig, tok, report: ReadReport) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Samples per category, every line accounted for in ``report``."""
    cfg.check()
    by_cat: dict[str, list] = {}
    for ds in cfg.datasets:
        for msgs, tools in conversations(ds, report):
            try:
                samples = fit_to_context(msgs, tools, cfg.mode, tok, cfg.max_context, report.rejects, report.trimmed)  # type: ignore[arg-type]
            except Reject as err:
                report.rejects[err.reason] += 1
                continue
            by_cat.setdefault(ds.category, []).extend(samples)
            report.samples[ds.category] += len(samples)
    return by_cat


def mix(by_cat: dict[str, list], weights: dict[str, float], total: int | None, seed: int, report: ReadReport) -> list[Tokenized]:
    """The mixture (see the module docstring), shuffled."""
    cats = [c for c in weights if by_cat.get(c)]
    if not cats:
        raise InputError("no SFT samples left after reading (see the rejects)")
    total = total or sum(len(by_cat[c]) for c in cats)
    w = np.array([weights[c] for c in cats])
    shares = np.round(total * w / w.sum()).astype(int)
    rng = np.random.default_rng(seed)
    out: list[Tokenized] = []
    for c, n in zip(cats, shares.tolist(), strict=True):
        pool = by_cat[c]
        reps, rest = divmod(n, len(pool))
        idx = np.concatenate([np.tile(np.arange(len(pool)), reps), rng.permutation(len(pool))[:rest]]).astype(int)
        out += [Tokenized(*pool[i], c) for i in idx.tolist()]
        report.mixed[c] += len(idx)
    order = rng.permutation(len(out))
    return [out[i] for i in order.tolist()]


def category_weights(cfg: DataConfig) -> dict[str, float]:
    cats = dict.fromkeys(ds.category for ds in cfg.datasets)
    bad = [c for c, w in cfg.weights.items() if w <= 0 or c not in cats]
    if bad:
        raise InputError(f"data.weights: {bad} must be categories of the datasets, with positive weights")
    return {c: cfg.weights.get(c, 1.0) for c in cats}
