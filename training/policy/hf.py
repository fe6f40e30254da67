"""Any ``transformers`` causal LM directory as a policy (``model: {hf: PATH}``), trained with our
losses and optimizers.

Loaded with ``AutoModelForCausalLM`` and ``AutoTokenizer``; the chat template is the model's own
(``apply_chat_template``), so GLM-5's thinking modes do not apply. Decoding uses transformers'
``DynamicCache``, with the sampler's left padding given as ``attention_mask`` and its per-row
RoPE positions as ``position_ids``, so a row sees exactly what it would see alone. A checkpoint is
a Hugging Face directory (``save_pretrained`` + the tokenizer, chat template included) that also
holds ``optimizer.pt`` and ``trainer.json`` like ours, so any HF tool loads it and a stage or the
async trainer resumes from it.

``hf_optimizer`` is ``training.optim.optimizers.build_optimizer``'s routing for an arbitrary
model: vectors AdamW without weight decay, input/output embeddings AdamW, every other matrix
Muon (or all AdamW with ``name: adamw``); ``muon_split`` has no MLA up-projection blocks to split
here, so it is plain Muon.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from core.errors import InputError, UserError
from training.checkpoint import PREFIX, mismatches, publish, rng_state
from training.optim.muon import Muon
from training.policy.base import Policy
from training.policy.hf_chat import continuation, defuse, fold_for_template, parse_reply

DTYPES = ("float32", "bfloat16", "float16")


class HFCodec:
    """A transformers tokenizer and its chat template, with the ``Codec`` API of our server."""

    def __init__(self, tok, stop_ids: list[int]):
        self.tok = tok
        self.stop_ids = stop_ids

    @property
    def vocab_size(self) -> int:
        return len(self.tok)

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return self.tok.decode(ids, skip_special_tokens=skip_special)

    def token(self, tid: int) -> str:
        return self.tok.convert_ids_to_tokens(tid) or ""

    def _render(self, messages: list[dict], tools: Any = None, generation_prompt: bool = True) -> str:
        return self.tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)

    def chat_prompt(self, messages: Any, thinking: bool = False, tools: Any = None) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise UserError("messages must be a non-empty list")
        if not self.tok.chat_template:  # a base model serves token ids, not chats
            raise UserError(f"{self.tok.name_or_path}: the tokenizer has no chat template")
        template = self.tok.chat_template
        try:
            messages = fold_for_template(messages, tools, template)
            text = self._render(messages, tools if "tools" in template else None)
        except Exception as err:  # noqa: BLE001 - a template error is the caller's bad messages
            raise UserError(f"messages cannot be rendered by the chat template: {err}") from None
        return self.encode(text)

    def chat_reply(self, ids: list[int], thinking: bool = False) -> dict[str, Any]:
        """The assistant message of sampled ids; ``<tool_call>`` blocks become ``tool_calls``
        (``training.policy.hf_chat``), read from the text with special tokens kept (a tokenizer may
        hold ``<tool_call>`` as one) and the end-of-turn token dropped."""
        end = len(ids)
        while end and ids[end - 1] in self.stop_ids:
            end -= 1
        reply = parse_reply(self.decode(ids[:end], skip_special=False))
        if "tool_calls" not in reply:  # plain text, as graders have always read it
            return {"role": "assistant", "content": self.decode(ids).strip()}
        return reply

    def hands_over(self, ids: list[int]) -> bool:
        """Whether a turn that stopped at an end-of-turn token handed over to the tools: it called one."""
        return bool(self.chat_reply(ids).get("tool_calls"))

    def observation(self, messages: list[dict[str, Any]], thinking: bool = False) -> tuple[list[int], list[dict]]:
        """(ids, messages as rendered) of tool results (and any next user turn) after a model turn
        that called tools, then the generation prompt — as the model's own template renders them,
        appended to the sampled ids (``hf_chat.continuation``); special-token text in them is broken."""
        msgs = self._defused(messages)
        return self.encode(self._continuation(msgs)[1]), msgs

    def after_turn(self, last: int | None, new: list[dict[str, Any]], thinking: bool = False) -> list[int]:
        """Ids of ``new`` tool/user messages after a model turn whose last sampled id is ``last``;
        a turn cut off before its end-of-turn token gets the template's one first."""
        end, text = self._continuation(self._defused(new))
        return self.encode(text) if last in self.stop_ids else self.encode(end + text)

    def _defused(self, messages: list[dict[str, Any]]) -> list[dict]:
        specials = list(self.tok.all_special_tokens) + [str(t) for t in self.tok.get_added_vocab()]
        return [{"role": m.get("role"), "content": defuse(str(m.get("content") or ""), specials)} for m in messages]

    def _continuation(self, msgs: list[dict]) -> tuple[str, str]:
        stops = [self.tok.decode([i], skip_special_tokens=False) for i in self.stop_ids]
        try:
            return continuation(lambda ms, gen: self._render(ms, None, gen), msgs, stops)
        except UserError:
            raise
        except Exception as err:  # noqa: BLE001 - the template refused these messages
            raise UserError(f"observation cannot be rendered by the chat template: {err}") from None

    def save(self, directory: Path) -> None:
        self.tok.save_pretrained(str(directory))

    @classmethod
    def load(cls, path: Path) -> HFCodec:
        """The tokenizer of a model directory, its stop ids from ``generation_config.json`` too."""
        from transformers import AutoTokenizer, GenerationConfig

        tok = AutoTokenizer.from_pretrained(str(path))
        gen = GenerationConfig.from_pretrained(str(path)) if (path / "generation_config.json").is_file() else None
        return cls(tok, _stop_ids(tok, gen))


def _stop_ids(tok, gen) -> list[int]:
    """End-of-turn ids: the tokenizer's eos and the generation config's (e.g. ``<|im_end|>``)."""
    ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
    eos = getattr(gen, "eos_token_id", None)
    ids |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    return sorted(ids)


def head_split(model) -> tuple[Any, Any] | None:
    """(decoder, LM head) when the model's logits are exactly ``head(decoder(x).last_hidden_state)``
    — checked once per model on a short input, so a model that scales or caps its logits after the
    head (Gemma's soft-capping, Cohere's logit scale) keeps the full forward; None then."""
    if not hasattr(model, "_head_split"):
        split = None
        decoder, head = getattr(model, "get_decoder", lambda: None)(), model.get_output_embeddings()
        if decoder is not None and head is not None:
            was = model.training
            model.eval()
            try:
                ids = torch.arange(8, device=head.weight.device).remainder(model.config.vocab_size)[None]
                with torch.no_grad():
                    full = model(input_ids=ids).logits.float()
                    mine = head(decoder(input_ids=ids).last_hidden_state).float()
                if full.shape == mine.shape and torch.allclose(full, mine, atol=1e-4, rtol=1e-4):
                    split = (decoder, head)
            except Exception:  # any other calling convention: the full forward
                split = None
            finally:
                model.train(was)
        model._head_split = split
    return model._head_split


def logits_at(model, ids: torch.Tensor, attn: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[N, V]: a transformers causal LM's logits at the N positions ``where`` ([B, L] bool) is set —
    the LM head on those positions alone where ``head_split`` allows, else the full forward's rows."""
    split = head_split(model)
    if split is None:
        return model(input_ids=ids, attention_mask=attn, use_cache=False).logits[where]
    decoder, head = split
    return head(decoder(input_ids=ids, attention_mask=attn, use_cache=False).last_hidden_state[where])


class HFPolicy(Policy):
    kind = "hf"

    def __init__(self, model, tok):
        self.module = model
        self.codec = HFCodec(tok, _stop_ids(tok, getattr(model, "generation_config", None)))
        # transformers 5.x renames past_key_values to cache, model class by model class
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._keep_last = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @classmethod
    def load(cls, path: str | Path, dtype: str = "float32") -> HFPolicy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        if not (path / "config.json").is_file():
            raise InputError(f"model.hf: {path} is not a Hugging Face model directory (no config.json)")
        if dtype not in DTYPES:
            raise UserError(f"model.dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
        tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
        return cls(model, tok)

    @property
    def vocab_size(self) -> int:
        return self.module.get_input_embeddings().weight.shape[0]

    @staticmethod
    def _attention_mask(tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        lens = torch.tensor([int(d[0]) for d in doc_lens], device=tokens.device)
        return (torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lens[:, None]).long()

    def __call__(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        return self.module(input_ids=tokens, attention_mask=self._attention_mask(tokens, doc_lens), use_cache=False).logits

    def logits_at(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor], where: torch.Tensor) -> torch.Tensor:
        return logits_at(self.module, tokens, self._attention_mask(tokens, doc_lens), where)

    def decode(self, tokens, cache, positions, key_mask):
        if cache is None:
            from transformers import DynamicCache

            cache = DynamicCache(config=self.module.config)
        out = self.module(input_ids=tokens, attention_mask=key_mask.long(), position_ids=positions,
                          use_cache=True, **{self._cache_arg: cache}, **self._keep_last)  # the sampler reads the last
        return out.logits, getattr(out, self._cache_arg)

    def select(self, cache, rows):
        cache.batch_select_indices(rows)
        return cache

    def optimizer(self, cfg) -> torch.optim.Optimizer:
        return hf_optimizer(self.module, cfg)

    def save(self, root, step, optimizer, state) -> Path:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        final = root / f"{PREFIX}{step:08d}"
        tmp = root / f".{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        self.module.save_pretrained(str(tmp))
        self.codec.save(tmp)
        if optimizer is not None:
            torch.save({"optimizer": optimizer.state_dict(), **rng_state()}, tmp / "optimizer.pt")
        (tmp / "trainer.json").write_text(json.dumps({"step": step, **state, "policy": "hf"}, indent=1), "utf-8")
        publish(tmp, final)
        return final

    def weight_mismatches(self, state: dict[str, torch.Tensor]) -> list[str]:
        """As ``training.checkpoint.mismatches``, except that a tied tensor ``save_pretrained``
        wrote once may be missing under its other name."""
        own = self.module.state_dict()
        ptr = {k: v.data_ptr() for k, v in own.items()}
        present = {ptr[k] for k in state if k in ptr}
        return [m for m in mismatches(own, state) if not (m.startswith("missing ") and ptr.get(m.split()[1]) in present)]


def hf_optimizer(model: torch.nn.Module, cfg) -> Muon:
    """See the module docstring: our optimizer routing over an arbitrary ``nn.Module``."""
    emb = {id(model.get_input_embeddings().weight)}
    out = model.get_output_embeddings()
    if out is not None:
        emb.add(id(out.weight))
    groups: dict[str, list] = {"muon": [], "adamw": [], "adamw_no_wd": []}
    names: dict[str, list] = {"muon": [], "adamw": [], "adamw_no_wd": []}
    for name, p in model.named_parameters():  # tied weights appear once
        if not p.requires_grad:
            continue
        r = "adamw_no_wd" if p.ndim < 2 else "adamw" if (cfg.name == "adamw" or id(p) in emb) else "muon"
        groups[r].append(p)
        names[r].append(name)
    spec = [
        {"params": groups["muon"], "blocks": [None] * len(groups["muon"]), "use_muon": True, "names": names["muon"]},
        {"params": groups["adamw"], "names": names["adamw"]},
        {"params": groups["adamw_no_wd"], "weight_decay": 0.0, "names": names["adamw_no_wd"]},
    ]
    return Muon(
        [g for g in spec if g["params"]], lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum,
        nesterov=cfg.nesterov, ns_steps=cfg.ns_steps, ns_coefficients=cfg.ns_coefficients, rms_scale=cfg.rms_scale,
        betas=cfg.betas, eps=cfg.eps, ns_dtype=getattr(torch, cfg.ns_dtype),
    )  # fmt: skip
