"""Our GLM-5-shaped model as a policy: MLA latent-cache decoding, MuonSplit/Muon/AdamW, the
aux-loss-free expert-bias update after every step, checkpoints in ``training.checkpoint``'s layout.

The codec is the checkpoint's ``tokenizer.json`` with GLM-5's chat template
(``training.policy.codec.Codec``); a model trained on the toy tasks' 23-token vocabulary has
none (its tasks speak token ids). A tokenizer whose template tokens would fall outside the
model's vocabulary is refused here, naming the fix: the pretraining BPE must reserve them.
"""

from __future__ import annotations

from pathlib import Path

import torch

from core.errors import UserError
from training.checkpoint import checkpoint_config, load_checkpoint, mismatches, save_checkpoint
from training.model.config import ModelConfig
from training.model.glm import GLMModel
from training.optim.optimizers import build_optimizer
from training.policy.base import Policy
from training.policy.codec import Codec


class GLMPolicy(Policy):
    kind = "glm"

    def __init__(self, model: GLMModel, codec: Codec | None = None):
        self.module = model
        if codec is not None and codec.vocab_size > model.cfg.vocab_size:
            raise UserError(
                f"the tokenizer has {codec.vocab_size} tokens with the chat template's special tokens, the model "
                f"{model.cfg.vocab_size}: reserve the template's tokens when training the BPE "
                "(core.tokenizer.TokenizerConfig.special_tokens)"
            )
        self.codec = codec

    @classmethod
    def new(cls, cfg: ModelConfig, seed: int = 0, codec: Codec | None = None) -> GLMPolicy:
        torch.manual_seed(seed)
        return cls(GLMModel(cfg), codec)

    @classmethod
    def load(cls, step: Path) -> GLMPolicy:
        """A ``training.checkpoint`` step directory; the tokenizer is the step's or its parent's."""
        model = GLMModel(checkpoint_config(step))
        load_checkpoint(step, model)
        tok = next((d / "tokenizer.json" for d in (step, step.parent) if (d / "tokenizer.json").is_file()), None)
        return cls(model, Codec.load(tok) if tok else None)

    @property
    def cfg(self) -> ModelConfig:
        return self.module.cfg

    @property
    def vocab_size(self) -> int:
        return self.module.cfg.vocab_size

    def __call__(self, tokens: torch.Tensor, doc_lens: list[torch.Tensor]) -> torch.Tensor:
        return self.module(tokens, doc_lens)

    def decode(self, tokens, cache, positions, key_mask):
        return self.module.decode(tokens, cache, positions=positions, key_mask=key_mask, last_only=True)

    def select(self, cache, rows):
        return [c.select(rows) for c in cache]

    def optimizer(self, cfg) -> torch.optim.Optimizer:
        return build_optimizer(self.module, cfg)

    def after_step(self) -> None:
        self.module.update_expert_bias()

    def save(self, root, step, optimizer, state) -> Path:
        opt = optimizer if optimizer is not None else torch.optim.SGD(self.module.parameters(), lr=0.0)
        meta = {**state, "config": {**state.get("config", {}), "model": self.cfg.model_dump(mode="json")}}
        path = save_checkpoint(root, step, self.module, opt, meta)
        if self.codec is not None:
            self.codec.save(path)
        return path

    def weight_mismatches(self, state: dict[str, torch.Tensor]) -> list[str]:
        return mismatches(self.module.state_dict(), state)
