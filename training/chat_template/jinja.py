"""The GLM-5 template as a Hugging Face ``chat_template`` (Jinja), for a ``transformers`` tokenizer.

``glm5_jinja(mode)`` is the text a tokenizer saves as ``chat_template.jinja``: with it
``apply_chat_template(messages, tools=..., add_generation_prompt=True)`` renders exactly
``generation_prompt(messages, tools, mode)``, and a conversation ending with an assistant message
renders as the last sample ``render`` trains for it, without that sample's implied ending token
(the model writes it: ``<|user|>`` or ``<|observation|>``). So a model fine-tuned on our renderer
(``training.sft.hf`` with ``model.chat_template: glm5``) is prompted as it was trained by
``transformers`` and by any engine that applies the saved template. Tested against ``render`` /
``generation_prompt`` on generated conversations in every mode.

The mode trained is the template's default; ``apply_chat_template(..., thinking_mode="preserved")``
picks another. As in ``render``: assistant text and reasoning are stripped, inline
``<think>R</think>A`` content is split, thinking before the last user turn is cleared to the lone
``</think>`` (``interleaved``, ``turn``), a ``turn``-mode user message with ``"thinking": false``
turns thinking off for its turn. Tool-call arguments must be objects (the ``transformers``
convention; Jinja cannot parse a JSON string), strings written raw, other values as JSON.
"""

from __future__ import annotations

import json

from training.chat_template.template import MODES, TOOLS_FOOTER, TOOLS_HEADER, Mode

# One line per construct; every tag trims the whitespace around it (``{%- -%}``), so the only text
# rendered is the tokens written inline and the ``{{ }}`` expressions.
_TEMPLATE = """\
{#- GLM-5 chat template (training.chat_template.jinja): what training.chat_template.render trains -#}
{%- set mode = thinking_mode if thinking_mode is defined else @MODE@ -%}
{%- macro text(c) -%}
{%- if c is string -%}{{ c }}
{%- elif c is iterable and c is not mapping -%}{%- for p in c -%}{{ p.text }}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(last_user=-1, thinking=true) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
[gMASK]<sop>
{%- if tools -%}<|system|>{{ @HEADER@ }}
{%- for t in tools -%}{{ t | tojson }}{{ '\\n' }}{%- endfor -%}
{{ @FOOTER@ }}
{%- endif -%}
{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>{{ text(m.content) }}
{%- set ns.thinking = mode != 'turn' or m.thinking is not false -%}
{%- elif m.role == 'system' -%}<|system|>{{ text(m.content) }}
{%- elif m.role == 'tool' -%}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' -%}<|observation|>{%- endif -%}
<tool_response>{{ text(m.content) }}</tool_response>
{%- elif m.role == 'assistant' -%}<|assistant|>
{%- set content = text(m.content) -%}
{%- set reasoning = m.reasoning_content if m.reasoning_content is string else '' -%}
{%- if m.reasoning_content is not string and '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}
{%- set content = content.split('</think>', 1)[1] -%}
{%- endif -%}
{%- if ns.thinking and (mode == 'preserved' or loop.index0 >= ns.last_user) -%}<think>{{ reasoning.strip() }}</think>
{%- else -%}</think>
{%- endif -%}
{{ content.strip() }}
{%- for tc in m.tool_calls or [] -%}
{%- set f = tc.function if tc.function is defined else tc -%}
{%- if f.arguments is string and f.arguments.strip() -%}
{{ raise_exception('GLM-5 template: give tool-call arguments as an object, not a JSON string') }}
{%- endif -%}
<tool_call>{{ f.name }}
{%- for k, v in (f.arguments if f.arguments is mapping else {}).items() -%}
<arg_key>{{ k }}</arg_key><arg_value>{{ v if v is string else v | tojson }}</arg_value>
{%- endfor -%}
</tool_call>
{%- endfor -%}
{%- else -%}{{ raise_exception('GLM-5 template: unknown role ' ~ m.role) }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{{ '<think>' if ns.thinking else '</think>' }}{%- endif -%}
"""


def glm5_jinja(mode: Mode = "interleaved") -> str:
    """The GLM-5 chat template in Jinja, ``mode`` its default thinking mode."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    # JSON string literals are valid Jinja string literals (ASCII, backslash escapes)
    return (
        _TEMPLATE.replace("@MODE@", json.dumps(mode))
        .replace("@HEADER@", json.dumps(TOOLS_HEADER))
        .replace("@FOOTER@", json.dumps(TOOLS_FOOTER))
    )
