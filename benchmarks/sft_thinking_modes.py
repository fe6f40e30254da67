"""SFT of a real model in each of GLM-5's three thinking modes: SmolLM2-135M-Instruct trained with
GLM-5's chat template (``model.chat_template: glm5``: its special tokens added to SmolLM2's
tokenizer, the embeddings grown) in ``interleaved``, ``preserved`` and ``turn`` mode, each from the
shipped model, with the held-out loss before and after (issue 29 part 3).

Data: ``configs/sft_smollm2.yaml``'s real public data (the Python FAQ as chat, Terminal-Bench
tasks answered by a bash tool call, arithmetic problems) plus ``reasoning.jsonl``: multi-turn
arithmetic with its worked steps as ``reasoning_content`` and some user turns with thinking off
(``python -m samples post-train``) — the real data has no reasoning, and single-turn data renders
the same in every mode, so without it the three runs would train the same tokens. Each mode
renders the same conversations its own way (interleaved: one sample per user turn, earlier
thinking cleared; preserved: one sample, every thinking block kept; turn: thinking-off turns'
empty block in the prompt), so each mode has its own held-out samples (``model.heldout`` of
them, drawn the same way): the figures compare before with after within a mode, not modes.

Writes ``OUT/summary.json`` (per mode: ``heldout_loss_before/after``, samples, steps, seconds) and
``out/bench/sft_thinking_modes.json`` (one row per mode: held-out loss after vs before).
``python benchmarks/sft_thinking_modes.py [--steps N] [--modes interleaved,turn]``; ~8 min a mode
on 2 cores at the default 16 steps. A rerun reuses modes whose run finished (``--fresh``: all again).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script or imported by the tests alike

from benchmarks._report import Result, write  # noqa: E402
from core.config import load_yaml, validate_config  # noqa: E402
from core.io import atomic_write_text  # noqa: E402
from training.chat_template import MODES  # noqa: E402
from training.sft.__main__ import SFTConfig, resolve_dataset_paths  # noqa: E402
from training.sft.__main__ import run as run_sft  # noqa: E402

CONFIG = ROOT / "configs" / "sft_smollm2.yaml"
KEEP = ("heldout_loss_before", "heldout_loss_after", "heldout_samples", "samples", "rejects", "trained_steps",
        "loss_first", "loss_last")


def mode_config(mode: str, out: Path, steps: int) -> SFTConfig:
    data = load_yaml(CONFIG)
    data["out"] = str(out)
    data["model"] = data["model"] | {"chat_template": "glm5"}
    data["data"] = data["data"] | {"mode": mode}
    data["data"]["datasets"] = [*data["data"]["datasets"], {"path": "post_train/reasoning.jsonl", "category": "reasoning"}]
    data["data"]["weights"] = data["data"]["weights"] | {"reasoning": 1.0}
    data["train"]["steps"] = steps
    cfg = validate_config(SFTConfig, data, source=f"{CONFIG.name} (glm5, {mode})")
    resolve_dataset_paths(cfg)
    return cfg


def run_mode(mode: str, out: Path, steps: int, log) -> dict:
    done = out / "mode.json"
    if done.is_file():
        log(f"{mode}: reusing {done}")
        return json.loads(done.read_text())
    shutil.rmtree(out, ignore_errors=True)  # an unfinished run's files are not a resume point here
    t0 = time.monotonic()
    res = run_sft(mode_config(mode, out, steps), log=lambda m: log(f"[{mode}] {m}"))
    row = {k: res.get(k) for k in KEEP} | {"seconds": round(time.monotonic() - t0, 1)}
    shutil.rmtree(out / "hf", ignore_errors=True)  # ~0.5 GB a mode; the figures are the product here
    atomic_write_text(done, json.dumps(row, indent=1))
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "sft_thinking_modes")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"--modes: unknown {bad}; have {list(MODES)}")
    args.out = args.out.resolve()
    if args.fresh:
        shutil.rmtree(args.out, ignore_errors=True)
    from samples.post_train import build_post_train, default_seeds

    def log(msg: str) -> None:
        print(msg, flush=True)

    build_post_train(seeds=default_seeds(), log=log)
    rows = {m: run_mode(m, args.out / m, args.steps, log) for m in modes}
    atomic_write_text(args.out / "summary.json", json.dumps({"steps": args.steps, "modes": rows}, indent=1))
    print(json.dumps({m: {k: r[k] for k in ("heldout_loss_before", "heldout_loss_after")} for m, r in rows.items()}))
    results = [Result(f"sft_thinking_modes_{m}", r["heldout_loss_after"], r["heldout_loss_before"], "held-out loss",
                      higher_is_better=False, ours_label=f"SmolLM2 after SFT, GLM-5 template, {m} mode",
                      baseline_label="SmolLM2 as shipped, GLM-5 template (new tokens' rows: the mean)",
                      notes=f"{r['heldout_samples']} held-out samples, {r['trained_steps']} steps")
               for m, r in rows.items()]  # fmt: skip
    write(__file__, results[0], {"summary": str(args.out / "summary.json")}, results[1:])


if __name__ == "__main__":
    main()
