import itertools
from pathlib import Path

import pytest

from tests.training.glm_tiny import tiny_model
from training.tools.pipeline_layout import chain, normalised, plan, reference_costs, uniform_cuts
from training.train_config import load_trainer_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def glm5():
    return load_trainer_config(ROOT / "configs/glm5_744b.yaml")


@pytest.mark.parametrize("pp,vpp", [(16, 2), (8, 1), (16, 1), (4, 3)])
def test_glm5_layout_is_valid_for_megatron_and_beats_an_even_split(glm5, pp, vpp):
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    ep = glm5.parallel.expert_model_parallel_size
    p = plan(glm5.model, pp, vpp, ep)
    layout = PipelineParallelLayerLayout(p.layout, pp)  # Megatron's own parser and checks
    layout.validate_layer_layout(num_layers=78, mtp_num_layers=1)
    assert layout.virtual_pipeline_model_parallel_size == vpp
    flat = [k for chunk in p.chunks for k in chunk]
    assert flat == ["E"] + ["t"] * 78 + ["m", "L"]
    items = chain(glm5.model, 4096, ep)
    refs = reference_costs(items, pp, 18.0, 4096.0)
    baseline = max(normalised(items, uniform_cuts(items, pp, vpp), pp, 18.0, 4096.0, *refs))
    assert p.objective < baseline
    # the rank holding the output layer (and the MTP block) carries fewer decoder layers than the busiest
    per_rank = [sum(c.count("t") for s, c in enumerate(p.chunks) if s % pp == r) for r in range(pp)]
    last = (len(p.chunks) - 1) % pp
    assert per_rank[last] < max(per_rank)


def test_no_interleaving_is_the_exact_optimum():
    cfg = tiny_model(vocab_size=30000, num_layers=7, mtp_num_layers=1)
    pp = 3
    p = plan(cfg, pp, 1)
    items = chain(cfg, 4096)
    refs = reference_costs(items, pp, 18.0, 4096.0)
    best = min(
        max(normalised(items, [0, a, b, len(items)], pp, 18.0, 4096.0, *refs))
        for a, b in itertools.combinations(range(1, len(items)), 2)
    )
    assert abs(p.objective - best) < 1e-12


def test_cli_prints_a_layout():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "training.tools.pipeline_layout",
            str(ROOT / "configs/glm5_744b.yaml"),
            "--pp",
            "8",
            "--vpp",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert out.stdout.startswith("pipeline_model_parallel_layout: E") and "rank   7" in out.stdout
