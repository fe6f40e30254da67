"""SFT of any Hugging Face causal LM directory (``model.hf``) with our loss and optimizer, resumable.

The model is loaded with ``AutoModelForCausalLM``, the tokenizer with ``AutoTokenizer``. The
conversations are rendered (``training.sft.hf_data``) with the model's own chat template
(``model.chat_template: own``, the default: one sample per conversation, the loss mask = the
assistant turns and their end marker) or with GLM-5's (``glm5``: our renderer in the configured
``data.mode`` — interleaved / preserved / turn — with the same samples, masks and context rule as
our own model's SFT; the template's special tokens are added to the tokenizer and the model's
embeddings, and the saved tokenizer's ``chat_template.jinja`` renders the GLM-5 format).

Training: one sample per row, right-padded to the batch's longest, the cross-entropy of
position t predicting token t+1 only where token t+1 is trained, token-mean (as
``training.model.glm._shifted_ce``); the trainer config's optimizer routed as for any HF
policy (``training.policy.hf.hf_optimizer``), LR schedule, grad clip, seed and steps; the
samples are taken in the mixture's (seeded) order, ``loader.batch_size`` at a time.
``model.heldout`` samples are held out before mixing and their loss is measured before and after
training.

Checkpoints and resume (``training.sft.hf_checkpoint``): every ``checkpoint.every`` steps a
``step-N/`` under ``checkpoint.dir`` (default ``OUT/hf_checkpoints``; the newest
``checkpoint.keep`` kept) holds the model, tokenizer, optimizer and RNG states, the step and the
data position. Re-running the same command resumes from the latest one and trains only the
remaining steps, reaching the weights an uninterrupted run reaches (bit-exact on CPU, tested); a
checkpoint of other settings or data is refused. The final model goes to ``OUT/hf``
(``save_pretrained`` + the tokenizer, chat template included), published whole, ready for the
next stage; a re-run of a finished run trains nothing.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field

from core.config import StrictModel
from core.errors import InputError
from core.io import atomic_write_text
from training.checkpoint import load_optimizer_state
from training.metrics_log import MetricsSink, read_log_rows
from training.optim.schedules import lr_at
from training.policy.hf import hf_optimizer, logits_at
from training.sft.data import ReadReport, category_weights, mix
from training.sft.hf_checkpoint import fingerprint, finished, latest, publish_final, save_step
from training.sft.hf_data import (
    add_glm5_tokens,
    glm5_samples,
    glm5_stop_ids,
    grow_embeddings,
    own_template_samples,
)


class SFTModelConfig(StrictModel):
    hf: str | None = None  # a Hugging Face model directory or `smollm2`; None = our GLM model (train.model)
    heldout: int = Field(default=0, ge=0)  # samples held out (before mixing) for a held-out loss
    dtype: str = "float32"
    # own: the model's chat template; glm5: GLM-5's in data.mode, its tokens added (training.sft.hf_data)
    chat_template: Literal["own", "glm5"] = "own"


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
    """Token-mean cross-entropy of t -> t+1 where token t+1 is trained (``_shifted_ce``'s rule).
    The LM head and the cross-entropy run only at those positions (prompts and padding are most of a
    chat batch, and a 49K-row head is a fifth of a small model's forward): ``training.policy.hf.logits_at``."""
    trained = mask[:, 1:] > 0  # logits at position t score token t + 1
    logits = logits_at(model, ids, attn, F.pad(trained, (0, 1)))
    return F.cross_entropy(logits.float(), ids[:, 1:][trained])


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
    """SFT of ``cfg.model.hf``; writes ``OUT/hf``, ``OUT/metrics.jsonl``, ``OUT/sft.json`` and
    checkpoints; resumes from the latest checkpoint (see the module docstring)."""
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
        glm5 = cfg.model.chat_template == "glm5"
        added = add_glm5_tokens(tok, cfg.data.mode) if glm5 else 0
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        report = ReadReport()
        by_cat = (glm5_samples if glm5 else own_template_samples)(cfg.data, tok, report)
        if not by_cat:
            raise InputError(f"no SFT samples left after reading; rejects {dict(report.rejects)}")
        train_pools, held = split_heldout(by_cat, cfg.model.heldout, cfg.data.seed)
        weights = {c: w for c, w in category_weights(cfg.data).items() if c in train_pools}
        mixed = mix(train_pools, weights, cfg.data.total_samples, cfg.data.seed, report)
        fp = fingerprint(cfg.model, tcfg, [(s.category, s.tokens, s.mask) for s in mixed]
                         + [("heldout", t, m) for t, m in held])  # fmt: skip
        final = out / "hf"
        done = finished(final, fp)
        if done is not None:  # this run's finished model: nothing to train, nothing to rewrite
            log(f"   nothing left to train: {final} holds this run's final model (step {done['step']})")
            if not (out / "sft.json").is_file():
                atomic_write_text(out / "sft.json", json.dumps(done["sft"], indent=1))
            return done["sft"]
        ckpt_dir = Path(tcfg.checkpoint.dir) if tcfg.checkpoint.dir else out / "hf_checkpoints"
        resume = latest(ckpt_dir, fp)
        torch.manual_seed(tcfg.seed)
        dtype = getattr(torch, cfg.model.dtype)
        model = AutoModelForCausalLM.from_pretrained(str(resume[0] if resume else src), dtype=dtype)
        if glm5:
            if resume is None:
                grow_embeddings(model, len(tok))
            model.generation_config.eos_token_id = glm5_stop_ids(tok)  # a GLM-5 turn ends on these
        model.train()
        bs, steps = tcfg.loader.batch_size, tcfg.steps
        opt = hf_optimizer(model, tcfg.optimizer)
        if resume is not None:
            load_optimizer_state(resume[0], opt)  # and torch's RNG state
            step, pos, before = resume[1]["step"], resume[1]["position"], resume[1]["heldout_loss_before"]
            log(f"   resumed from {resume[0]} at step {step}")
        else:
            step, pos, before = 0, 0, heldout_loss(model, held, pad_id, bs)
        start = step
        log(f"   {src}: {sum(p.numel() for p in model.parameters()):,} parameters; {len(mixed)} samples, "
            f"{len(held)} held out (loss {before}); rejects {dict(report.rejects) or 'none'}"
            f"{f'; GLM-5 template ({cfg.data.mode}), {added} tokens added' if glm5 else ''}")  # fmt: skip
        sink = MetricsSink(out / "metrics.jsonl", append=step > 0, from_step=step)
        try:
            while step < steps:
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
                sink.write(rec)
                log(f"step {step:5d}  loss {rec['loss']:.4f}  lr {lr:.2e}  {rec['tokens_per_s']:.0f} tok/s")
                step += 1
                every = tcfg.checkpoint.every
                if every and step % every == 0 and step < steps:  # the last one is OUT/hf
                    state = {"position": pos, "heldout_loss_before": before, "fingerprint": fp}
                    save_step(ckpt_dir, step, model, tok, opt, state, tcfg.checkpoint.keep)
        finally:
            sink.close()
        after = heldout_loss(model, held, pad_id, bs)
        losses = [r["loss"] for r in read_log_rows(out / "metrics.jsonl")]  # the whole run's, resumed or not
        summary = {
            **report.as_dict(), "model_hf": str(src), "chat_template": cfg.model.chat_template,
            "added_tokens": added, "heldout_samples": len(held), "heldout_loss_before": before,
            "heldout_loss_after": after, "trained_steps": steps, "resumed_from_step": start,
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
            "checkpoint": str(final), "rejects_total": sum(Counter(report.rejects).values()),
        }  # fmt: skip
        publish_final(final, model, tok, {"step": steps, "fingerprint": fp, "sft": summary})
    finally:
        torch.set_num_threads(threads)
    atomic_write_text(out / "sft.json", json.dumps(summary, indent=1))
    return summary
