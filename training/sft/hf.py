"""SFT of any Hugging Face causal LM directory (``model.hf``) with our loss and optimizer.

The model is loaded with ``AutoModelForCausalLM``, the tokenizer with ``AutoTokenizer``; the
chat template is the model's own (``apply_chat_template``), not GLM-5's, so the GLM thinking
modes do not apply here. Loss mask = the tokens of assistant turns: for each assistant message
the conversation is rendered up to it with the generation prompt (its start) and including it
(its end), and the characters between are trained — the end marker (e.g. ``<|im_end|>``)
included, so the model learns to stop. Templates that rewrite earlier turns when a later one
is added (so the shorter rendering is not a prefix of the whole) are rejected as
``template_not_prefix_stable``, never trained with a wrong mask.

A template that does not mention ``tool_calls`` / ``reasoning_content`` (SmolLM2's) would drop
them silently; they are written into the assistant content instead (reasoning as
``<think>R</think>``, each call as a JSON line), and the tool list into a system message.

Training: one sample per row, right-padded to the batch's longest, the cross-entropy of
position t predicting token t+1 only where token t+1 is trained, token-mean (as
``training.model.glm._shifted_ce``); the trainer config's optimizer routed as for any HF
policy (``training.policy.hf.hf_optimizer``), LR schedule, grad clip, seed and steps.
``model.heldout`` samples are held out before mixing and their loss is measured before and after training. The final model goes to ``OUT/hf`` with
``save_pretrained`` and the tokenizer (chat template included), ready for the next stage.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.io import atomic_write_text
from training.chat_template import Reject, conversation_of, normalize
from training.metrics_log import MetricsSink
from training.optim.schedules import lr_at
from training.policy.hf import hf_optimizer
from training.sft.data import ReadReport, category_weights, mix, read_records


class SFTModelConfig(StrictModel):
    hf: str | None = None  # a Hugging Face model directory or `smollm2`; None = our GLM model (train.model)
    heldout: int = Field(default=0, ge=0)  # samples held out (before mixing) for a held-out loss
    dtype: str = "float32"


def _fold_for_template(msgs: list[dict], tools: list, template: str) -> list[dict]:
    """Messages the template can render without losing content (see the module docstring)."""
    out = []
    if tools and "tools" not in template:
        out.append(
            {
                "role": "system",
                "content": "Tools:\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools),
            }
        )
    for m in msgs:
        m = dict(m)
        if m["role"] == "assistant":
            if "reasoning_content" in m and "reasoning_content" not in template:
                m["content"] = f"<think>{m.pop('reasoning_content')}</think>" + m["content"]
            if "tool_calls" in m and "tool_calls" not in template:
                calls = [json.dumps(c["function"], ensure_ascii=False) for c in m.pop("tool_calls")]
                m["content"] = "\n".join([m["content"], *calls]).strip()
        out.append(m)
    return out


def _render(tok, msgs, tools, gen: bool) -> str:
    return tok.apply_chat_template(msgs, tools=tools or None, tokenize=False, add_generation_prompt=gen)


def encode_hf(msgs: list[dict], tools: list, tok) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of one conversation with the tokenizer's own chat template."""
    template = tok.chat_template or ""
    if not template:
        raise InputError("model.hf: the tokenizer has no chat template")
    msgs = _fold_for_template(msgs, tools, template)
    tools = tools if "tools" in template else []
    full = _render(tok, msgs, tools, False)
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        a, b = _render(tok, msgs[:i], tools, True), _render(tok, msgs[: i + 1], tools, False)
        if not (b.startswith(a) and full.startswith(b)):
            raise Reject("template_not_prefix_stable", f"assistant message {i}")
        spans.append((len(a), len(b)))
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    mask = [int(any(s <= start < e for s, e in spans)) for start, _end in enc["offset_mapping"]]
    return list(enc["input_ids"]), mask


def hf_samples(data, tok, report: ReadReport) -> dict[str, list[tuple[list[int], list[int]]]]:
    """Samples per category; every record ends as samples or a counted reject."""
    by_cat: dict[str, list] = {}
    for ds in data.datasets:
        for _no, record in read_records(Path(ds.path)):
            report.conversations += 1
            if isinstance(record, Reject):
                report.rejects[record.reason] += 1
                continue
            if ds.min_reward is not None:
                reward = record.get("reward") if isinstance(record, dict) else None
                if not isinstance(reward, (int, float)) or reward < ds.min_reward:
                    report.rejects["below_min_reward"] += 1
                    continue
            try:
                msgs, tools = conversation_of(record)
                ids, mask = encode_hf(normalize(msgs), tools or [], tok)
            except Reject as err:
                report.rejects[err.reason] += 1
                continue
            if len(ids) > data.max_context:
                report.rejects["longer_than_max_context"] += 1
                continue
            if not any(mask):
                report.rejects["nothing_to_train"] += 1
                continue
            by_cat.setdefault(ds.category, []).append((ids, mask))
            report.samples[ds.category] += 1
    return by_cat


def split_heldout(by_cat: dict[str, list], n: int, seed: int) -> tuple[dict[str, list], list]:
    """``n`` samples drawn (seeded) across categories, out of the training pools."""
    flat = [(c, s) for c, pool in by_cat.items() for s in pool]
    if n and n >= len(flat):
        raise InputError(f"model.heldout: {n} held-out samples leave none to train ({len(flat)} in all)")
    order = np.random.default_rng(seed + 1).permutation(len(flat)).tolist()
    held = [flat[i][1] for i in order[:n]]
    rest: dict[str, list] = {}
    for i in sorted(order[n:]):
        rest.setdefault(flat[i][0], []).append(flat[i][1])
    return rest, held


def batch_of(samples: list[tuple[list[int], list[int]]], pad_id: int):
    L = max(len(t) for t, _ in samples)
    ids = torch.full((len(samples), L), pad_id, dtype=torch.long)
    mask = torch.zeros((len(samples), L), dtype=torch.long)
    attn = torch.zeros((len(samples), L), dtype=torch.long)
    for r, (t, m) in enumerate(samples):
        ids[r, : len(t)] = torch.tensor(t)
        mask[r, : len(m)] = torch.tensor(m)
        attn[r, : len(t)] = 1
    return ids, mask, attn


def sft_loss(model, ids, mask, attn) -> torch.Tensor:
    """Token-mean cross-entropy of t -> t+1 where token t+1 is trained (``_shifted_ce``'s rule)."""
    logits = model(input_ids=ids, attention_mask=attn).logits
    targets = ids[:, 1:].clone()
    targets[mask[:, 1:] == 0] = -100
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100
    )


@torch.no_grad()
def heldout_loss(model, samples, pad_id: int, batch_size: int) -> float | None:
    """Token-weighted mean loss over held-out samples."""
    if not samples:
        return None
    was = model.training
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(samples), batch_size):
        ids, mask, attn = batch_of(samples[i : i + batch_size], pad_id)
        k = int(mask[:, 1:].sum())
        if k:
            total += float(sft_loss(model, ids, mask, attn)) * k
            n += k
    model.train(was)
    return total / n if n else None


def run_hf(cfg, tcfg, log=print) -> dict[str, Any]:
    """SFT of ``cfg.model.hf``; writes ``OUT/hf``, ``OUT/metrics.jsonl``, ``OUT/sft.json``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.policy import PolicySource

    src = Path(PolicySource(hf=cfg.model.hf).path)  # `smollm2`: the model the project ships, as everywhere
    if not (src / "config.json").is_file():
        raise InputError(f"model.hf: {src} is not a Hugging Face model directory (no config.json)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    if tcfg.threads:
        torch.set_num_threads(tcfg.threads)
    try:
        tok = AutoTokenizer.from_pretrained(str(src))
        if not tok.is_fast:
            raise InputError(f"model.hf: {src}: the loss mask needs a fast tokenizer (tokenizer.json)")
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        report = ReadReport()
        by_cat = hf_samples(cfg.data, tok, report)
        if not by_cat:
            raise InputError(f"no SFT samples left after reading; rejects {dict(report.rejects)}")
        train_pools, held = split_heldout(by_cat, cfg.model.heldout, cfg.data.seed)
        weights = {c: w for c, w in category_weights(cfg.data).items() if c in train_pools}
        mixed = mix(train_pools, weights, cfg.data.total_samples, cfg.data.seed, report)
        torch.manual_seed(tcfg.seed)
        model = AutoModelForCausalLM.from_pretrained(str(src), dtype=getattr(torch, cfg.model.dtype))
        model.train()
        bs = tcfg.loader.batch_size
        before = heldout_loss(model, held, pad_id, bs)
        log(f"   {src}: {sum(p.numel() for p in model.parameters()):,} parameters; {len(mixed)} samples, "
            f"{len(held)} held out (loss {before}); rejects {dict(report.rejects) or 'none'}")  # fmt: skip
        opt = hf_optimizer(model, tcfg.optimizer)
        sink = MetricsSink(out / "metrics.jsonl")
        steps, pos, losses = tcfg.steps, 0, []
        try:
            for step in range(steps):
                t0 = time.perf_counter()
                rows = [mixed[(pos + j) % len(mixed)] for j in range(bs)]
                pos += bs
                ids, mask, attn = batch_of([(s.tokens, s.mask) for s in rows], pad_id)
                lr = lr_at(step, steps, tcfg.schedule, tcfg.optimizer.lr)
                for g in opt.param_groups:
                    g["lr"] = lr
                loss = sft_loss(model, ids, mask, attn)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip)
                opt.step()
                dt = time.perf_counter() - t0
                rec = {"step": step, "loss": round(float(loss.detach()), 6), "lr": lr, "grad_norm": round(float(grad_norm), 6),
                       "tokens": int(attn.sum()), "tokens_per_s": round(int(attn.sum()) / dt, 1)}  # fmt: skip
                losses.append(rec["loss"])
                sink.write(rec)
                log(f"step {step:5d}  loss {rec['loss']:.4f}  lr {lr:.2e}  {rec['tokens_per_s']:.0f} tok/s")
        finally:
            sink.close()
        after = heldout_loss(model, held, pad_id, bs)
        hf_out = out / "hf"
        model.save_pretrained(str(hf_out))
        tok.save_pretrained(str(hf_out))
    finally:
        torch.set_num_threads(threads)
    summary = {
        **report.as_dict(), "model_hf": str(src), "heldout_samples": len(held),
        "heldout_loss_before": before, "heldout_loss_after": after, "trained_steps": steps,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "checkpoint": str(hf_out), "rejects_total": sum(Counter(report.rejects).values()),
    }  # fmt: skip
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=1))
    return summary
