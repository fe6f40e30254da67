"""Configuration of the long-context job (``configs/longctx.yaml``): stages with their
sequence length, token budget and mixture, the retrieval index, the scoring LM, EntropyLong."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from core.cache import cache_field
from core.config import StrictModel
from synth.entropylong import EntropyLongConfig
from synth.interleave import InterleaveConfig
from synth.mrcr import MrcrConfig
from synth.natural import NaturalConfig
from synth.retrieval import RetrievalConfig

KINDS = ("natural", "interleaved", "entropylong", "mrcr", "regular")


class Mixture(StrictModel):
    natural: float = Field(default=0.0, ge=0)
    interleaved: float = Field(default=0.0, ge=0)
    entropylong: float = Field(default=0.0, ge=0)
    mrcr: float = Field(default=0.0, ge=0)
    regular: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _sums_to_one(self) -> Mixture:
        total = sum(getattr(self, k) for k in KINDS)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"mixture fractions must sum to 1, got {total:g}")
        return self


class LongCtxStageConfig(StrictModel):
    """The data side of a mid-training stage: what its shards hold (``TrainStageConfig`` in
    ``training.train_config`` is the training side: which shards, how many steps)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    seq_len: int = Field(gt=16)
    token_budget: int = Field(gt=0)
    mixture: Mixture
    natural: NaturalConfig = NaturalConfig()
    # interleave documents of at least this fraction of seq_len (shorter ones would be
    # almost all distractors)
    interleave_min_frac: float = Field(default=0.125, gt=0, lt=1)
    # MRCR prompt-length bins as fractions of seq_len (room is left for the answer)
    mrcr_bins: list[tuple[float, float]] = [(0.25, 0.5), (0.5, 0.85)]
    # tokens per shard file (bounds the writer's memory for long sequences)
    shard_tokens: int = Field(default=1 << 24, gt=0)

    @field_validator("mrcr_bins")
    @classmethod
    def _fractions(cls, v: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if not v or any(not 0 < lo < hi <= 1 for lo, hi in v):
            raise ValueError(
                f"mrcr_bins must be [lo, hi] fractions of seq_len with 0 < lo < hi <= 1, got {v}"
            )
        return v


# GLM-5's 32K / 128K / 200K stages scaled to 4K / 8K / 16K and a quarter-million tokens each
# (configs/longctx.yaml says how to set the real sizes)
DEMO_STAGES = [
    LongCtxStageConfig(name="stage1", seq_len=4096, token_budget=262144, natural=NaturalConfig(min_tokens=2048),
                       mixture=Mixture(natural=0.4, interleaved=0.3, entropylong=0.05, mrcr=0.0, regular=0.25)),
    LongCtxStageConfig(name="stage2", seq_len=8192, token_budget=262144, natural=NaturalConfig(min_tokens=4096),
                       mixture=Mixture(natural=0.5, interleaved=0.3, entropylong=0.05, mrcr=0.0, regular=0.15)),
    LongCtxStageConfig(name="stage3", seq_len=16384, token_budget=262144, natural=NaturalConfig(min_tokens=8192),
                       mixture=Mixture(natural=0.4, interleaved=0.2, entropylong=0.05, mrcr=0.25, regular=0.1)),
]


class IndexConfig(StrictModel):
    max_chunks: int = Field(default=4000, gt=0)
    retrieval: RetrievalConfig = RetrievalConfig()


class LMConfig(StrictModel):
    # a transformers causal LM directory; None = SmolLM2-135M-Instruct via core.local_lm
    path: str | None = None
    data_dir: str = cache_field()  # where the model is cached (default: the user cache, core.cache)
    # caps the all-kept-chunks check (its context keeps the nearest tokens)
    max_tokens: int = Field(default=1024, gt=16)
    # torch threads; 0 = torch's default (one thread wins on a busy machine)
    threads: int = Field(default=1, ge=0)


class EntropyLongVerify(EntropyLongConfig):
    """The job's defaults (configs/longctx.yaml's), on a subclass so that a partial ``verify``
    section keeps them. The LM runs on CPU: short documents and contexts; any same-domain text
    lowers entropy ~0.2-0.4 nats, so delta asks for more."""

    max_doc_tokens: int = Field(default=96, ge=8)
    max_context_tokens: int = Field(default=256, gt=0)
    candidates: int = Field(default=5, gt=0)
    delta: float = 0.5
    max_kept: int = Field(default=6, gt=0)


class EntropyLongJobConfig(StrictModel):
    # documents verified (the LM is the slow part on CPU)
    docs: int = Field(default=4, ge=0)
    min_chars: int = Field(default=600, gt=0)
    sources: list[str] | None = ["python-docs"]
    verify: EntropyLongVerify = EntropyLongVerify()


class LongCtxConfig(StrictModel):
    documents: str = "out/demo/documents"
    tokenizer: str = "out/demo/tokenizer/tokenizer.json"
    output: str = "out/longctx"
    seed: int = 0
    index: IndexConfig = IndexConfig()
    interleave: InterleaveConfig = InterleaveConfig()
    entropylong: EntropyLongJobConfig = EntropyLongJobConfig()
    lm: LMConfig = Field(default_factory=LMConfig)  # its data_dir is the cache when the config is built
    mrcr: MrcrConfig = MrcrConfig()
    stages: list[LongCtxStageConfig] = DEMO_STAGES

    @field_validator("stages")
    @classmethod
    def _unique(cls, v: list[LongCtxStageConfig]) -> list[LongCtxStageConfig]:
        names = [s.name for s in v]
        if not v or len(set(names)) != len(names):
            raise ValueError(f"stages must be a non-empty list with unique names, got {names}")
        return v
