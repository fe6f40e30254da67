"""The policy: one interface over our GLM model and any ``transformers`` causal LM.

``base``  the interface (logits, KV-cached decode, optimizer, save/load weights) and the chat codec protocol
``glm``   our GLM-5-shaped model (MLA latent cache, MuonSplit, expert bias, our checkpoint layout)
``hf``    an ``AutoModelForCausalLM`` directory with its own tokenizer and chat template
``load``  ``model: {hf|checkpoint: PATH}``, checkpoint kinds, ``load_policy(path)``

The sampler (``training.serving``), SFT, the RL stages, distillation and the async trainer import
it; it imports none of them.
"""

from training.policy.base import ChatCodec, Policy
from training.policy.load import (
           PolicySource,
           as_policy,
           build_policy,
           checkpoint_kind,
           load_codec,
           load_policy,
)

__all__ = ["ChatCodec", "Policy", "PolicySource", "as_policy", "build_policy", "checkpoint_kind", "load_codec",
           "load_policy"]
