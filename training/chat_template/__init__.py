"""The GLM-5 chat template (see ``template`` for the layout and the thinking modes):
``render`` messages to text with loss-mask spans, ``parse`` text back, ``encode`` with the
special tokens ``add_special_tokens`` adds to a tokenizer, ``glm5_jinja`` the same template as a
Hugging Face ``chat_template``; ``python -m training.chat_template render`` on the command line."""

from training.chat_template.formats import conversation_of, sharegpt_to_messages
from training.chat_template.jinja import glm5_jinja
from training.chat_template.parse import parse
from training.chat_template.template import (
    ARG_KEY,
    ARG_VALUE,
    ASSISTANT,
    END_ARG_KEY,
    END_ARG_VALUE,
    END_THINK,
    END_TOOL_CALL,
    END_TOOL_RESPONSE,
    EOS,
    MODES,
    OBSERVATION,
    PREFIX,
    ROLE_TOKEN,
    SPECIAL_RE,
    SPECIAL_TOKENS,
    STOP_TOKENS,
    SYSTEM,
    THINK,
    TOOL_CALL,
    TOOL_RESPONSE,
    TOOLS_FOOTER,
    TOOLS_HEADER,
    USER,
    Mode,
    Reject,
    Sample,
    continuation,
    defuse,
    generation_prompt,
    normalize,
    render,
)  # fmt: skip
from training.chat_template.tokens import add_special_tokens, encode, stop_token_ids

__all__ = [
    "ARG_KEY", "ARG_VALUE", "ASSISTANT", "END_ARG_KEY", "END_ARG_VALUE", "END_THINK", "END_TOOL_CALL",
    "END_TOOL_RESPONSE", "EOS", "MODES", "OBSERVATION", "PREFIX", "ROLE_TOKEN", "SPECIAL_RE", "SPECIAL_TOKENS",
    "STOP_TOKENS", "SYSTEM", "THINK", "TOOL_CALL", "TOOL_RESPONSE", "TOOLS_FOOTER", "TOOLS_HEADER", "USER", "Mode",
    "Reject", "Sample", "add_special_tokens", "continuation", "conversation_of", "defuse", "encode", "generation_prompt", "glm5_jinja", "normalize",
    "parse", "render", "sharegpt_to_messages", "stop_token_ids",
]  # fmt: skip
