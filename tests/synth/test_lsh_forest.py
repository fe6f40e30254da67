"""synth.lsh_forest against brute force: summed shared prefix depth, exact Jaccard of hashed sets."""

import numpy as np
import pytest

from synth.lsh_forest import HashedSets, LshForest


def _shared_depth_brute(sigs: np.ndarray, q: np.ndarray, trees: int) -> np.ndarray:
    depth = sigs.shape[1] // trees
    out = np.zeros(len(sigs), dtype=np.int64)
    for row, sig in enumerate(sigs):
        for t in range(trees):
            a, b = sig[t * depth : (t + 1) * depth], q[t * depth : (t + 1) * depth]
            out[row] += next((i for i in range(depth) if a[i] != b[i]), depth)
    return out


@pytest.mark.parametrize("trees", [64, 16, 4])
def test_shared_depth_is_the_summed_common_prefix(trees):
    rng = np.random.default_rng(trees)
    # few distinct values, so prefixes of every depth are shared by someone
    sigs = rng.integers(0, 3, size=(200, 64)).astype(np.uint32)
    sigs[7] = sigs[3]  # an exact copy shares everything
    forest = LshForest(sigs, trees)
    for q in (sigs[3], rng.integers(0, 3, size=64).astype(np.uint32)):
        assert np.array_equal(forest.shared_depth(q), _shared_depth_brute(sigs, q, trees))
    assert forest.shared_depth(sigs[3])[7] == 64


def test_one_value_per_tree_counts_equal_values_even_for_large_values():
    rng = np.random.default_rng(0)
    sigs = rng.integers(0, 2**32, size=(50, 32), dtype=np.uint64).astype(np.uint32)
    q = sigs[10].copy()
    q[::2] = 2**32 - 1  # half of them changed
    got = LshForest(sigs, 32).shared_depth(q)
    assert np.array_equal(got, (sigs == q).sum(1)) and got[10] == 16


def test_hashed_sets_jaccard_is_exact():
    rng = np.random.default_rng(1)
    sets = [np.unique(rng.integers(0, 50, size=n).astype(np.uint32)) for n in (0, 5, 30, 60, 1)]
    hs = HashedSets(sets)
    q = np.unique(rng.integers(0, 50, size=25).astype(np.uint32))
    rows = np.array([4, 0, 2, 2, 3, 1])
    want = [len(set(q) & set(sets[r])) / max(1, len(set(q) | set(sets[r]))) for r in rows]
    assert np.allclose(hs.jaccard(q, rows), want)
    assert not hs.jaccard(np.empty(0, np.uint32), rows).any()  # an empty query shares nothing
