"""``make gpu-check``'s Megatron sections: training steps at GLM-5's layer widths, and an inference
engine loading our Hugging Face export. Each returns a dict for the report and never raises: a
failing run (an exception, out of memory) is recorded in its own entry with the error.

``megatron_train``: GLM-5's real layer shapes cut to 2 layers (``glm5_layer_config``: hidden 6144,
64 heads, q_lora 2048, kv_lora 512, qk 192+64, v 256, dense FFN 12288, 16 experts top-8 of FFN
2048 + a shared expert, vocab 154,880; 1 dense + 1 MoE layer) trained through
``training.megatron.train`` (AdamW, bf16 autocast, 2 x 4096 tokens a step, synthetic shards) twice:
``megatron.experts: megatron`` (Megatron's own: ``SequentialMLP`` under the local spec,
``TEGroupedMLP`` under Transformer Engine's) and ``grouped_gemm`` (ours, ``training/megatron/experts.py``).
Per run: tokens/s over the steps after warm-up (the first two: CUDA/Triton compilation), peak
CUDA memory, and MFU = training FLOPs per token (``training.tools.params.count``: 3 x forward,
causal attention) x tokens/s / the device's dense bf16 peak (``PEAK_BF16``; None for a device not
listed). ``grouped_gemm_ratio`` = ours / Megatron's tokens/s. ``expert_gemm``: the experts module
alone, forward + backward on the same routed tokens (balanced over the experts), ours against
``SequentialMLP`` and, where its ``grouped_gemm`` package imports, Megatron's ``GroupedMLP``.
With ``device="cpu"`` and ``widths="tiny"`` the same code runs in the tests (fp32, our experts on
the pure-torch reference).

``hf_engine``: a small GLM-5-shaped model of ours exported by ``training.hf`` (deepseek_v3, the
architecture engines serve) and loaded by vLLM or SGLang, whichever imports (greedy tokens from
the engine beside ours); where neither imports it says so.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

# dense bf16 peak FLOP/s by device name (vendor datasheets, without sparsity)
PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "H800": 989e12, "GH200": 989e12, "B200": 2250e12, "A100": 312e12}
ENGINES = ("vllm", "sglang")


def glm5_layer_config(dsa: bool = True, **extra):
    """GLM-5's layer shapes, 2 layers (1 dense + 1 MoE), 16 experts top-8."""
    from training.model.config import ModelConfig

    if dsa:
        extra = {"dsa_indexer_n_heads": 32, "dsa_indexer_head_dim": 128, "dsa_indexer_topk": 2048, **extra}
    return ModelConfig(num_layers=2, hidden_size=6144, ffn_hidden_size=12288, num_attention_heads=64,
                       vocab_size=154880, q_lora_rank=2048, kv_lora_rank=512, qk_head_dim=192,
                       qk_pos_emb_head_dim=64, v_head_dim=256, num_moe_experts=16, moe_router_topk=8,
                       moe_ffn_hidden_size=2048, moe_shared_expert_intermediate_size=2048,
                       moe_router_topk_scaling_factor=2.5, moe_first_k_dense_layers=1, **extra)  # fmt: skip


def tiny_layer_config():
    """The same structure at toy widths (the CPU test of this section)."""
    from training.model.config import ModelConfig

    return ModelConfig(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, vocab_size=256,
                       q_lora_rank=32, kv_lora_rank=16, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
                       num_moe_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32,
                       moe_shared_expert_intermediate_size=32, moe_router_topk_scaling_factor=2.5,
                       moe_first_k_dense_layers=1)  # fmt: skip


def peak_flops(device_name: str | None) -> float | None:
    for name, flops in sorted(PEAK_BF16.items(), key=lambda kv: -len(kv[0])):  # GH200 before H200
        if device_name and name in device_name:
            return flops
    return None


def synthetic_shards(out: Path, vocab: int, seq_len: int, rows: int) -> Path:
    from core.shards import ShardWriter, TokenizerInfo

    rng = np.random.default_rng(0)
    info = TokenizerInfo(id="gpu-check", vocab_size=vocab, eos_id=0)
    with ShardWriter(out, seq_len=seq_len, tokenizer=info, stage="gpu-check") as w:
        for _ in range(rows):
            w.add(rng.integers(1, vocab, seq_len, dtype=np.int32), [seq_len], "synthetic")
    return out


def trainer_config(model, experts: str, steps: int, batch: int, precision: str):
    from training.train_config import TrainerConfig

    return TrainerConfig.model_validate({
        "seed": 0, "steps": steps, "precision": precision, "loader": {"batch_size": batch, "seed": 0},
        "model": model.model_dump(), "optimizer": {"name": "adamw", "lr": 1e-4, "weight_decay": 0.1},
        "schedule": {"kind": "constant", "warmup_steps": 0}, "megatron": {"experts": experts},
    })  # fmt: skip


def train_run(cfg, shards: Path, device: str) -> dict[str, Any]:
    """One training run: tokens/s after warm-up, peak memory, MFU; or the error."""
    import torch

    from training.megatron.train import train
    from training.tools.params import count

    out: dict[str, Any] = {"experts": cfg.megatron.experts}
    try:
        if device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        result = train(cfg, shards, log=lambda m: None)
        rows = result.metrics
        steady = rows[2:] or rows
        tps = sum(r["tokens"] for r in steady) / sum(r["tokens"] / r["tokens_per_s"] for r in steady)
        kernels = {getattr(m, "kernel", None) for m in result.model.modules()} - {None}
        flops = count(cfg.model, seq_len=rows[0]["seq_len"])["flops_per_token"]
        name = torch.cuda.get_device_name() if device == "cuda" else None
        peak = peak_flops(name)
        out.update(tokens_per_s=round(tps, 1), losses=[r["loss"] for r in rows], steps=len(rows),
                   expert_kernel=sorted(kernels) or None, flops_per_token=flops,
                   mfu=round(flops * tps / peak, 4) if peak else None, peak_bf16_flops=peak,
                   seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
        if device == "cuda":
            out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        out["ok"] = all(np.isfinite(out["losses"]))
    except Exception as e:  # OOM, a CUDA fault, a Megatron assertion: recorded, the next run still goes
        out.update(ok=False, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
    return out


def section_megatron_train(device: str = "cuda", widths: str = "real", steps: int = 5) -> dict[str, Any]:
    # the trainer reads Arrow shards: pyarrow (~40 MiB) is too big for vendor/gpu-wheels, which
    # travels with the tree, so the machine must have its own
    missing = [m for m in ("pyarrow", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        return {"ok": False, "error": f"not run: {', '.join(missing)} not importable on this machine"}
    real = widths == "real"
    model = glm5_layer_config(dsa=False) if real else tiny_layer_config()
    seq_len, batch = (4096, 2) if real else (32, 2)
    precision = "bf16" if device == "cuda" else "fp32"
    out: dict[str, Any] = {"model": "glm5 layer widths, 2 layers" if real else "tiny", "seq_len": seq_len,
                           "batch": batch, "precision": precision}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        shards = synthetic_shards(Path(tmp) / "shards", model.vocab_size, seq_len, batch * (steps + 1))
        for experts in ("megatron", "grouped_gemm"):
            out[experts] = train_run(trainer_config(model, experts, steps, batch, precision), shards, device)
    ours, theirs = out["grouped_gemm"].get("tokens_per_s"), out["megatron"].get("tokens_per_s")
    out["grouped_gemm_ratio"] = round(ours / theirs, 3) if ours and theirs else None
    out["expert_gemm"] = expert_gemm_timing(model, seq_len * batch, device)
    out["ok"] = bool(out["megatron"].get("ok") and out["grouped_gemm"].get("ok") and out["expert_gemm"].get("ok"))
    return out


def expert_gemm_timing(model, tokens: int, device: str, iters: int = 5) -> dict[str, Any]:
    """The experts module alone (forward + backward), ours vs Megatron's, on the same routed tokens
    (``tokens`` x top-k rows, balanced over the experts); outputs compared."""
    try:
        return _time_experts(model, tokens, device, iters)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}


def _time_experts(model, tokens: int, device: str, iters: int) -> dict[str, Any]:
    import torch
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.transformer.moe import grouped_gemm_util
    from megatron.core.transformer.moe.experts import GroupedMLP, SequentialMLP
    from megatron.core.transformer.moe.moe_utils import get_default_pg_collection

    from training.megatron.cpu import cpu_stand_ins
    from training.megatron.experts import grouped_gemm_experts_class, stack_expert_weights
    from training.megatron.world import World
    from training.tools.megatron_bridge import to_megatron_config
    from training.train_config import TrainerConfig

    E, k, cuda = model.num_moe_experts, model.moe_router_topk, device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    out: dict[str, Any] = {"rows": tokens * k, "experts": E, "dtype": str(dtype).removeprefix("torch.")}
    with cpu_stand_ins():
        world = World(TrainerConfig(), cpu=not cuda)
        try:
            mcfg = to_megatron_config(model, use_cpu_initialization=True, bf16=cuda, params_dtype=dtype,
                                      moe_token_dispatcher_type="allgather")  # fmt: skip
            pg = get_default_pg_collection()
            mlp = get_moe_module_spec(use_te=False, num_experts=E, moe_grouped_gemm=False).submodules.experts
            modules = {"megatron_sequential": SequentialMLP(E, mcfg, mlp.submodules, pg_collection=pg),
                       "ours": grouped_gemm_experts_class()(E, mcfg, pg)}  # fmt: skip
            weights = stack_expert_weights(modules["megatron_sequential"].state_dict(prefix="mlp.experts."))
            modules["ours"].load_state_dict({k.removeprefix("mlp.experts."): v for k, v in weights.items()})
            if grouped_gemm_util.grouped_gemm_is_available() and cuda:
                modules["megatron_grouped"] = GroupedMLP(E, mcfg, pg)
                modules["megatron_grouped"].load_state_dict(modules["ours"].state_dict())
            else:
                out["megatron_grouped"] = "not run: the grouped_gemm package (CUTLASS) is not importable"
            gen = torch.Generator().manual_seed(0)
            x = torch.randn(tokens * k, model.hidden_size, generator=gen).to(device, dtype)
            counts = torch.full((E,), tokens * k // E, dtype=torch.long)
            counts[: tokens * k - int(counts.sum())] += 1
            probs = torch.rand(tokens * k, generator=gen).to(device, torch.float32)
            results = {}
            for name, mod in modules.items():
                mod.to(device)
                results[name] = _fwd_bwd_ms(mod, x, counts, probs, iters, cuda)
            ref = results["megatron_sequential"]["out"]
            for name, r in results.items():
                out[name] = {"ms": r["ms"], "max_abs_diff_vs_sequential": float((r["out"] - ref).abs().max())}
        finally:
            world.close()
    out["kernel"] = getattr(modules["ours"], "kernel", None)
    out["ratio_vs_sequential"] = round(out["megatron_sequential"]["ms"] / out["ours"]["ms"], 3)
    if "megatron_grouped" in results:
        out["ratio_vs_megatron_grouped"] = round(out["megatron_grouped"]["ms"] / out["ours"]["ms"], 3)
    scale = float(ref.abs().max()) or 1.0
    out["ok"] = all(v["max_abs_diff_vs_sequential"] <= (2e-2 if cuda else 1e-5) * scale
                    for n, v in out.items() if isinstance(v, dict))  # fmt: skip
    return out


def _fwd_bwd_ms(mod, x, counts, probs, iters: int, cuda: bool) -> dict[str, Any]:
    """Median milliseconds of forward + backward (after one warm-up), and the output."""
    import torch

    times = []
    for _ in range(iters + 1):
        xi = x.detach().requires_grad_()
        mod.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        y, _ = mod(xi, counts, probs)
        y.float().square().mean().backward()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return {"ms": round(1e3 * sorted(times[1:])[len(times[1:]) // 2], 3), "out": y.detach().float().cpu()}


def section_hf_engine(device: str = "cuda") -> dict[str, Any]:
    engines = {e: importlib.util.find_spec(e) is not None for e in ENGINES}
    out: dict[str, Any] = {"importable": engines}
    engine = next((e for e, ok in engines.items() if ok), None)
    if engine is None:
        out.update(ok=True, result=f"not run: neither {' nor '.join(ENGINES)} is importable on this machine")
        return out
    try:
        with tempfile.TemporaryDirectory() as tmp:
            hf_dir, ids, ours = _export_tiny(Path(tmp))
            theirs = _generate(engine, hf_dir, ids, len(ours))
        out.update(engine=engine, prompt=ids, ours=ours, engine_tokens=theirs, agree=ours == theirs, ok=True)
    except Exception as e:
        out.update(engine=engine, ok=False, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
    return out


def _export_tiny(tmp: Path) -> tuple[Path, list[int], list[int]]:
    """A tiny GLM-5-shaped model of ours -> our checkpoint -> HF (deepseek_v3); its greedy tokens."""
    import torch

    from training.checkpoint import save_checkpoint
    from training.hf.convert import export_checkpoint
    from training.model.glm import GLMModel
    from training.optim.optimizers import OptimizerConfig, build_optimizer
    from training.train_config import TrainerConfig

    torch.manual_seed(0)
    cfg = tiny_layer_config().model_copy(update={"layernorm_epsilon": 1e-6})  # transformers' fixed MLA-norm eps
    model = GLMModel(cfg).eval()
    tcfg = TrainerConfig(model=cfg)
    save_checkpoint(tmp / "ours", 0, model, build_optimizer(model, OptimizerConfig()),
                    {"config": tcfg.model_dump(mode="json")})  # fmt: skip
    export_checkpoint(tmp / "ours", tmp / "hf", arch="deepseek_v3", log=lambda m: None)
    ids = [5, 17, 42, 99, 3]
    seq = list(ids)
    with torch.no_grad():
        for _ in range(4):
            logits = model(torch.tensor([seq]), [torch.tensor([len(seq)])])
            seq.append(int(logits[0, -1].argmax()))
    return tmp / "hf", ids, seq[len(ids) :]


def _generate(engine: str, hf_dir: Path, ids: list[int], n: int) -> list[int]:
    if engine == "vllm":
        from vllm import LLM, SamplingParams

        llm = LLM(model=str(hf_dir), skip_tokenizer_init=True, enforce_eager=True, dtype="float32",
                  gpu_memory_utilization=0.2, max_model_len=64)  # fmt: skip
        params = SamplingParams(max_tokens=n, temperature=0.0, detokenize=False)
        return list(llm.generate([{"prompt_token_ids": ids}], params)[0].outputs[0].token_ids)
    import sglang

    llm = sglang.Engine(model_path=str(hf_dir), skip_tokenizer_init=True, dtype="float32", mem_fraction_static=0.2)
    try:
        return list(llm.generate(input_ids=ids, sampling_params={"max_new_tokens": n, "temperature": 0})["output_ids"])
    finally:
        llm.shutdown()
