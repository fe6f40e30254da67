"""Our model against transformers' own implementations, both ways (issue 29 part 1; goal: max abs logit
difference <= 1e-4 in float32 for GLM-5 ``glm_moe_dsa``, GLM-4.5 ``glm4_moe`` and ``deepseek_v3``).

For each architecture (``training.hf.parity``, tiny random models made by transformers itself,
DSA's top-k 4 below the 12-token sequences so the sparse path is compared):
- **import**: transformers' model saved with ``save_pretrained``, imported into ours; our logits vs its;
- **export**: our checkpoint as the trainer writes it, exported and loaded by ``AutoModelForCausalLM``.
Each row is the largest absolute difference over ``--seqs`` random sequences against the 1e-4 bound
(lower is better: the ratio is bound / difference, >= 1 within it); the headline is the worst row.
Not a speed benchmark: it records the parity the tests in tests/training/hf/test_parity.py hold.
Writes out/bench/hf_parity.json. Run: `python benchmarks/hf_parity.py [--seqs 3]` (~1 min on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._report import Result, write  # noqa: E402
from training.hf.parity import ARCHS, TOL, export_diff, import_diff  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", type=int, default=3, help="random sequences per direction and architecture")
    args = ap.parse_args(argv)
    import transformers

    rows, diffs = [], {}
    with tempfile.TemporaryDirectory(prefix="hf-parity-") as tmp:
        for arch in ARCHS:
            got = {"import": import_diff(arch, Path(tmp) / f"{arch}-import", args.seqs),
                   "export": export_diff(arch, Path(tmp) / f"{arch}-export", args.seqs)[0]}
            diffs[arch] = got
            for way, diff in got.items():
                label = "transformers -> ours" if way == "import" else "ours -> transformers"
                print(f"{arch:12s} {label}: max abs logit diff {diff:.2e}", flush=True)
                rows.append(Result(f"hf_parity_{arch}_{way}", diff, TOL, "max abs logit diff (float32)", goal=1.0,
                                   higher_is_better=False, ours_label=f"{arch} {label}",
                                   baseline_label="the 1e-4 bound"))
    worst = max(rows, key=lambda r: r.ours)
    headline = Result("hf_parity", worst.ours, TOL, "max abs logit diff (float32), worst of 6", goal=1.0,
                      higher_is_better=False, ours_label=f"worst: {worst.ours_label}", baseline_label="the 1e-4 bound",
                      notes="3 architectures x import/export, tiny random models made by transformers")
    inputs = {"transformers": transformers.__version__, "seqs": args.seqs, "max_abs_diff": diffs}
    write(__file__, headline, inputs, rows)


if __name__ == "__main__":
    main()
