"""One passage pool from the real novels and one set of samples, shared by the MRCR tests."""

import pytest

from synth.mrcr import MrcrConfig, generate, passage_pool


@pytest.fixture(scope="package")
def pool(sample_corpus):
    return passage_pool([sample_corpus.books_jsonl], MrcrConfig().passages)


@pytest.fixture(scope="package")
def samples(pool):
    return generate(pool, 18, MrcrConfig(bins=[(3000, 6000), (6000, 12000)], seed=3))
