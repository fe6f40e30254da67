"""Samples of a Hugging Face tokenizer for ``training.sft.hf``: with the model's own chat template,
or with GLM-5's (``model.chat_template: glm5``), whose special tokens are added to the tokenizer
and to the model's embeddings.

**Own template** (``own``). Loss mask = the tokens of assistant turns: for each assistant message
the conversation is rendered up to it with the generation prompt (its start) and including it
(its end), and the characters between are trained — the end marker (e.g. ``<|im_end|>``)
included, so the model learns to stop. Templates that rewrite earlier turns when a later one is
added (so the shorter rendering is not a prefix of the whole) are rejected as
``template_not_prefix_stable``, never trained with a wrong mask. A template that does not mention
``tool_calls`` / ``reasoning_content`` (SmolLM2's) would drop them silently; they are written into
the assistant content instead (reasoning as ``<think>R</think>``, each call as a JSON line), and
the tool list into a system message (``training.policy.hf_chat.fold_for_template``: the format
multi-turn rollouts prompt with and parse). One sample per conversation.

**GLM-5 template** (``glm5``). The samples, masks and context rule of our own model's SFT
(``training.sft.data.tokenized_samples``, the configured ``data.mode``), encoded by the HF
tokenizer's ``tokenizers`` backend once the template's special tokens are added to it as special
tokens; the tokenizer's ``chat_template`` becomes ``glm5_jinja(mode)``, so what it saves renders
what was trained. The model's embeddings grow by the new tokens (``grow_embeddings``) and its
generation config stops on the template's stop tokens.
"""

from __future__ import annotations

from core.errors import InputError
from training.chat_template import (
    SPECIAL_TOKENS,
    STOP_TOKENS,
    Mode,
    Reject,
    encode,
    glm5_jinja,
    render,
)
from training.policy.hf_chat import fold_for_template
from training.sft.data import ReadReport, conversations, tokenized_samples

Samples = dict[str, list[tuple[list[int], list[int]]]]


# -- the model's own template ----------------------------------------------------------------------
def _render(tok, msgs, tools, gen: bool) -> str:
    return tok.apply_chat_template(msgs, tools=tools or None, tokenize=False, add_generation_prompt=gen)


def encode_hf(msgs: list[dict], tools: list, tok) -> tuple[list[int], list[int]]:
    """(token ids, loss mask) of one conversation with the tokenizer's own chat template."""
    template = tok.chat_template or ""
    if not template:
        raise InputError("model.hf: the tokenizer has no chat template")
    msgs = fold_for_template(msgs, tools, template)
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


def own_template_samples(data, tok, report: ReadReport) -> Samples:
    """Samples per category; every record ends as a sample or a counted reject."""
    by_cat: Samples = {}
    for ds in data.datasets:
        for msgs, tools in conversations(ds, report):
            try:
                ids, mask = encode_hf(msgs, tools or [], tok)
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


# -- GLM-5's template ------------------------------------------------------------------------------
# every construct of the template, with spaces and newlines at the special-token boundaries
_PROBE = (
    [{"role": "system", "content": " s\n"}, {"role": "user", "content": " a b\n"},
     {"role": "assistant", "reasoning_content": "r s", "content": "c d",
      "tool_calls": [{"function": {"name": "f", "arguments": {"k": " v w", "n": [1, 2]}}}]},
     {"role": "tool", "content": "\n t "}, {"role": "assistant", "content": "e f"}],
    [{"type": "function", "function": {"name": "f"}}],
)  # fmt: skip


def add_glm5_tokens(tok, mode: Mode) -> int:
    """Add the GLM-5 template's special tokens to an HF tokenizer (tokens it has keep their ids)
    and make ``glm5_jinja(mode)`` its chat template; returns how many tokens are new."""
    if tok.backend_tokenizer is None:
        raise InputError("model.chat_template=glm5: the tokenizer has no tokenizers backend (tokenizer.json)")
    n = tok.add_special_tokens({"extra_special_tokens": SPECIAL_TOKENS}, replace_extra_special_tokens=False)
    tok.chat_template = glm5_jinja(mode)
    # our encoder works piece by piece (special tokens split out first); it must give the ids the
    # tokenizer gives the whole text, or apply_chat_template + encode would not be what was trained
    (sample,) = render(_PROBE[0], "preserved", _PROBE[1])
    pieces, _ = encode(sample, tok.backend_tokenizer)
    if pieces != tok(sample.text, add_special_tokens=False)["input_ids"]:
        raise InputError(
            f"model.chat_template=glm5: {tok.name_or_path} tokenizes text between special tokens "
            "differently from the whole text (e.g. a SentencePiece prefix space); use model.chat_template=own"
        )
    return n


def glm5_samples(data, tok, report: ReadReport) -> Samples:
    """Samples per category as our own model's SFT makes them, in the HF tokenizer's ids."""
    return tokenized_samples(data, tok.backend_tokenizer, report)


def glm5_stop_ids(tok) -> list[int]:
    """The ids a GLM-5-template model ends its turn with (``<|user|>``, ``<|observation|>``, EOS)."""
    return [tok.backend_tokenizer.token_to_id(t) for t in STOP_TOKENS]


def grow_embeddings(model, vocab: int) -> int:
    """Resize the input (and an untied output) embedding to ``vocab`` rows; returns the rows added.
    New rows are the mean of the existing rows: a common initialisation for added tokens, which
    starts their logits near the average token's instead of at random (transformers' own
    ``mean_resizing`` samples around the mean, which is not the mean)."""
    import torch

    old = model.get_input_embeddings().weight.shape[0]
    if vocab <= old:
        return 0
    model.resize_token_embeddings(vocab, mean_resizing=False)
    tables = (model.get_input_embeddings(), model.get_output_embeddings())
    with torch.no_grad():
        for emb in {id(e.weight): e for e in tables if e is not None}.values():  # a tied one once
            emb.weight[old:] = emb.weight[:old].mean(dim=0, keepdim=True)
            if getattr(emb, "bias", None) is not None:
                emb.bias[old:] = emb.bias[:old].mean()
    return vocab - old
