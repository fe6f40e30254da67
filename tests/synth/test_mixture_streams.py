"""synth.mixture_streams: MRCR samples from a passage pool sized in tokens."""

from collections import Counter
from itertools import islice

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from core.errors import InputError
from synth.mixture_streams import mrcr_parts
from synth.mrcr import MrcrConfig


def _tokenizer() -> Tokenizer:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def _pool(n_titles: int, per_title: int) -> dict[str, list[str]]:
    return {f"doc {t}": [f"paragraph {t}-{i} " + "words " * 40 for i in range(per_title)] for t in range(n_titles)}


def test_needle_counts_the_pool_cannot_hold_are_skipped_and_counted():
    """Three paragraphs per document hold 2 needles but not 8: the 8-needle plans are counted
    skips and the stream keeps giving 2-needle samples (it used to stop the whole job)."""
    cfg = MrcrConfig(needles=[2, 8])
    skips: Counter = Counter()
    stream = mrcr_parts(_pool(4, 3), [(200, 400)], 1000, _tokenizer(), cfg, np.random.default_rng(0), skips)
    samples = list(islice(stream, 3))
    assert [meta["n_needles"] for _, meta, _ in samples] == [2, 2, 2]
    assert skips["too_few_paragraphs_for_8_needles"] >= 2


def test_no_needle_count_fits_is_an_error_naming_the_problem():
    stream = mrcr_parts(_pool(2, 2), [(200, 400)], 1000, _tokenizer(), MrcrConfig(needles=[2, 4]),
                        np.random.default_rng(0), Counter())
    with pytest.raises(InputError, match="cannot place 2 needles"):
        next(stream)
