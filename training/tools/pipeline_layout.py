"""Pipeline layout planner: embedding, decoder layers, MTP and loss onto (virtual) pipeline stages.

The chain ``E, t_0 .. t_{N-1}, m (the MTP block), L`` is cut into PP x VPP contiguous chunks;
chunk s runs on pipeline rank s % PP as its virtual stage s // PP (Megatron's interleaved
order). Each rank's cost is its memory and its compute; the planner minimises the largest
``max(memory / mean memory, compute / mean compute)`` over ranks, so a rank that holds the
154,880-wide output layer, or the MTP block, gets fewer decoder layers ("flexible MTP
placement"). The result is a Megatron ``pipeline_model_parallel_layout`` string
(``"Et*4|t*5|...|t*3mL"``), checked by Megatron's own parser in the tests.

Cost model (estimates, per rank, per token of a micro-batch):
* compute: 3 x forward FLOPs (``training.tools.params``) of the items held;
* memory: ``bytes_per_param`` x parameters (routed experts divided by expert parallelism)
  + activations ``activation_bytes_per_token`` x tokens x micro-batches in flight, which under
  1F1B is PP - rank (the first ranks hold the most); the loss layer also keeps fp32 logits;
* the MTP block needs the embedding (for shifted tokens) and the output layer; on the loss's
  rank it shares them, elsewhere it holds copies.
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import typer

from core.cli import user_errors
from core.errors import ConfigError
from training.model.config import ModelConfig
from training.tools.params import attention_params, attention_score_flops, indexer_params, mlp_params


@dataclass(frozen=True)
class Item:
    kind: str  # "E", "t", "m", "L" (Megatron's layout letters)
    params: float  # held on the rank (after expert-parallel division)
    flops: float  # training FLOPs per token
    act_bytes: float  # activation bytes per token kept for backward


@dataclass
class Plan:
    layout: str
    chunks: list[list[str]]
    rank_memory: list[float]
    rank_compute: list[float]
    objective: float


def chain(
    c: ModelConfig,
    seq_len: int = 4096,
    ep: int = 1,
    activation_bytes_per_token: float | None = None,
) -> list[Item]:
    h, V = c.hidden_size, c.vocab_size
    act = activation_bytes_per_token if activation_bytes_per_token is not None else 34.0 * h
    ctx = (seq_len + 1) / 2
    attn = attention_params(c) + indexer_params(c) + 2 * h

    def layer(moe: bool) -> tuple[float, float]:
        total, active = mlp_params(c, moe)
        if moe:  # routed experts are split over the expert-parallel ranks
            routed = c.num_moe_experts * 3 * h * c.moe_ffn_hidden_size
            total = total - routed + routed / ep
        return attn + total, 3 * (2.0 * (attn + active) + attention_score_flops(c, ctx))

    items = [Item("E", V * h, 0.0, 2.0 * h)]
    for moe in c.moe_pattern:
        p, f = layer(moe)
        items.append(Item("t", p, f, act))
    head_flops = 3 * 2.0 * V * h
    if c.mtp_depths:
        p, f = layer(c.moe_pattern[-1])
        extra = 3 * h + 2 * h * h
        items.append(
            Item(
                "m",
                p + extra,
                c.mtp_depths * (f + 3 * 2.0 * extra + head_flops),
                c.mtp_depths * (act + 4.0 * V),
            )
        )
    items.append(Item("L", V * h + h, head_flops, 4.0 * V))  # fp32 logits kept for the loss
    return items


def rank_costs(
    items: list[Item], cuts: list[int], pp: int, bytes_per_param: float, tokens: float
) -> tuple[list[float], list[float]]:
    """Memory and compute per rank for chunk boundaries ``cuts`` (chunk s = items[cuts[s]:cuts[s+1]])."""
    mem, comp = [0.0] * pp, [0.0] * pp
    kinds_on = [set() for _ in range(pp)]
    for s in range(len(cuts) - 1):
        r = s % pp
        in_flight = pp - r
        for it in items[cuts[s] : cuts[s + 1]]:
            kinds_on[r].add(it.kind)
            mem[r] += bytes_per_param * it.params + it.act_bytes * tokens * in_flight
            comp[r] += it.flops
    emb, head = items[0].params, items[-1].params
    for r in range(pp):  # MTP's copies of the embedding and output layer
        if "m" in kinds_on[r]:
            mem[r] += bytes_per_param * (
                (0 if "E" in kinds_on[r] else emb) + (0 if "L" in kinds_on[r] else head)
            )
    return mem, comp


def reference_costs(items: list[Item], pp: int, bytes_per_param: float, tokens: float) -> tuple[float, float]:
    """Per-rank memory and compute of a perfect split (fixed normalisers for every layout)."""
    mem = sum(bytes_per_param * it.params + it.act_bytes * tokens * (pp + 1) / 2 for it in items)
    return mem / pp, sum(it.flops for it in items) / pp


def normalised(items, cuts, pp, bytes_per_param, tokens, m_ref, c_ref) -> list[float]:
    mem, comp = rank_costs(items, cuts, pp, bytes_per_param, tokens)
    return [max(m / m_ref, x / c_ref) for m, x in zip(mem, comp, strict=True)]


def _valid(items: list[Item], cuts: list[int], pp: int, vpp: int) -> bool:
    if any(b <= a for a, b in itertools.pairwise(cuts)):
        return False  # every chunk non-empty
    if items[-2].kind == "m":
        m_index = len(items) - 2
        s = next(i for i in range(len(cuts) - 1) if cuts[i] <= m_index < cuts[i + 1])
        if s // pp != vpp - 1 or (vpp > 1 and s % pp == 0):
            return False  # Megatron: MTP in a rank's last virtual stage, not on rank 0 when interleaved
    return True


def plan(
    c: ModelConfig,
    pp: int,
    vpp: int = 1,
    ep: int = 1,
    seq_len: int = 4096,
    micro_batch_tokens: float | None = None,
    bytes_per_param: float = 18.0,
    activation_bytes_per_token: float | None = None,
) -> Plan:
    """Minimise the largest normalised per-rank cost. ``bytes_per_param`` 18 = bf16 weights and
    grads, fp32 master weights and two fp32 optimizer moments."""
    c.check()
    items = chain(c, seq_len, ep, activation_bytes_per_token)
    S = pp * vpp
    if S > len(items):
        raise ConfigError(
            f"parallel: {S} pipeline chunks for only {len(items)} items (embedding, layers, MTP, loss)"
        )
    tokens = micro_batch_tokens if micro_batch_tokens is not None else float(seq_len)
    m_ref, c_ref = reference_costs(items, pp, bytes_per_param, tokens)

    def objective(cuts: list[int]) -> tuple[float, float]:
        per_rank = normalised(items, cuts, pp, bytes_per_param, tokens, m_ref, c_ref)
        return max(per_rank), sum(v * v for v in per_rank)

    n = len(items)
    if vpp == 1:
        starts = [_dp_cuts(items, pp, bytes_per_param, tokens, m_ref, c_ref)]
    else:  # interleaved: a rank's cost sums non-adjacent chunks; local search from two starts
        even = [0] + [1 + round(i * (n - 2) / S) for i in range(1, S)] + [n]
        starts = [c for c in (even, _first_valid(items, pp, vpp)) if _valid(items, c, pp, vpp)]
    cuts, best = None, None
    for start in starts:
        c, score = _descend(start, objective, items, pp, vpp)
        if best is None or score < best:
            cuts, best = c, score
    mem, comp = rank_costs(items, cuts, pp, bytes_per_param, tokens)
    chunks = [[it.kind for it in items[cuts[s] : cuts[s + 1]]] for s in range(S)]
    return Plan(layout_string(chunks), chunks, mem, comp, best[0])


def _descend(cuts, objective, items, pp, vpp):
    """Move one boundary by one item while that lowers (max, sum of squares)."""
    best, improved = objective(cuts), True
    while improved:
        improved = False
        for i in range(1, len(cuts) - 1):
            for delta in (-1, 1):
                trial = cuts.copy()
                trial[i] += delta
                if _valid(items, trial, pp, vpp):
                    score = objective(trial)
                    if score < best:
                        cuts, best, improved = trial, score, True
    return cuts, best


def _dp_cuts(
    items: list[Item], pp: int, bytes_per_param: float, tokens: float, m_ref: float, c_ref: float
) -> list[int]:
    """Exact min-max contiguous partition when each rank holds one chunk (no interleaving)."""
    n = len(items)

    @functools.cache
    def cost(a: int, b: int, r: int) -> float:
        part = items[a:b]
        mem = sum(bytes_per_param * it.params + it.act_bytes * tokens * (pp - r) for it in part)
        kinds = {it.kind for it in part}
        if "m" in kinds:
            mem += bytes_per_param * (
                (0 if "E" in kinds else items[0].params) + (0 if "L" in kinds else items[-1].params)
            )
        return max(mem / m_ref, sum(it.flops for it in part) / c_ref)

    @functools.cache
    def best(a: int, r: int) -> tuple[float, tuple[int, ...]]:
        """Best (max cost, cuts) for items[a:] on ranks r..pp-1."""
        if r == pp - 1:
            return cost(a, n, r), (n,)
        options = []
        for b in range(a + 1, n - (pp - 1 - r) + 1):
            rest, cuts = best(b, r + 1)
            options.append((max(cost(a, b, r), rest), (b, *cuts)))
        return min(options)

    return [0, *best(0, 0)[1]]


def _first_valid(items: list[Item], pp: int, vpp: int) -> list[int]:
    """MTP and loss alone in the last chunk(s); layers spread evenly over the rest."""
    n, S = len(items), pp * vpp
    body = S - 1
    cuts = [0] + [1 + round(i * (n - 3) / body) for i in range(1, body)] + [n - 2, n]
    if not _valid(items, cuts, pp, vpp):
        raise ConfigError(f"parallel: no valid layout for pp={pp} vpp={vpp}")
    return cuts


def layout_string(chunks: list[list[str]]) -> str:
    parts = []
    for chunk in chunks:
        out = []
        for kind, run in itertools.groupby(chunk):
            k = len(list(run))
            out.append(kind if k == 1 else f"{kind}*{k}")
        parts.append("".join(out))
    return "|".join(parts)


def uniform_cuts(items: list[Item], pp: int, vpp: int) -> list[int]:
    """Baseline: the decoder layers split evenly, E on the first chunk, MTP + L on the last."""
    n, S = len(items), pp * vpp
    layers = [i for i, it in enumerate(items) if it.kind == "t"]
    per = [len(layers) // S + (1 if s < len(layers) % S else 0) for s in range(S)]
    cuts, pos = [0], 1
    for k in per[:-1]:
        pos += k
        cuts.append(pos)
    return cuts + [n]


app = typer.Typer(add_completion=False, help="Plan a pipeline-parallel layout (Megatron layout string).")


@app.command()
@user_errors
def main(
    config: Path = typer.Argument(..., help="training YAML (model: and parallel: sections)"),
    pp: int = typer.Option(None, help="pipeline size (default: parallel.pipeline_model_parallel_size)"),
    vpp: int = typer.Option(None, help="virtual stages per rank (default: the config's, else 1)"),
    seq_len: int = typer.Option(4096, help="tokens per micro-batch"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    from training.train_config import load_trainer_config

    cfg = load_trainer_config(config)
    par = cfg.parallel
    result = plan(
        cfg.model,
        pp or par.pipeline_model_parallel_size,
        vpp or par.virtual_pipeline_model_parallel_size or 1,
        par.expert_model_parallel_size,
        seq_len,
    )
    if json_out:
        typer.echo(json.dumps(result.__dict__))
        return
    typer.echo(f"pipeline_model_parallel_layout: {result.layout}")
    for r, (m, f) in enumerate(zip(result.rank_memory, result.rank_compute, strict=True)):
        typer.echo(f"  rank {r:3d}: memory {m / 2**30:8.1f} GiB   compute {f / 1e9:8.1f} GFLOP/token")
    typer.echo(f"max normalised rank cost: {result.objective:.3f}")


if __name__ == "__main__":
    app()
