"""One GPU check: Megatron's GPTModel vs ours, Megatron training, MoE kernels, an inference engine; one JSON report.

``make gpu-check`` (``python -m training.tools.gpu_check out/gpu-check/report.json``) is meant for a
CUDA machine that reaches no package registry and has its own Python 3.12, torch and triton.
What else it needs travels with the working tree in ``vendor/gpu-wheels`` (``make gpu-vendor``
fills it here: megatron-core 0.16.1's cp312 wheel and the small pure-python/cp312 wheels our
``training`` package imports, about 25 MiB). Transformer Engine is not shipped (GBs):
Megatron runs with its local spec (``training/tools/megatron_local.py`` lists the gaps 0.16.1 has
there and how each is filled).

Sections, each in its own subprocess under a share of ``--budget-s`` (default 420 s, inside
an 8-minute call), each recorded in the report even when it fails or times out, and the report
rewritten after every section so a killed run still leaves data:

  install          which vendored wheels were unpacked into vendor/gpu-site (already importable
                   distributions are skipped), versions of python/torch/triton/megatron-core
  megatron_config  configs/glm5_744b.yaml -> MLATransformerConfig (DSA fields included)
  megatron_logits  Megatron GPTModel built from our config via training/tools/megatron_bridge.py,
                   our converted weights loaded, logits compared in fp32 (TF32 off):
                   tiny (MLA+MoE), tiny+DSA (top-5 of 16 keys), and GLM-5's real layer shapes
                   (hidden 6144, 64 heads, q_lora 2048, kv_lora 512, qk 192+64, v 256, expert
                   FFN 2048, shared expert, dense FFN 12288, vocab 154880) cut to 2 layers (1
                   dense + 1 MoE) and 16 experts top-8, 4096 tokens, without and with DSA
                   (32x128, top-2048). Pass: relative max error 1e-4 (1e-2 with DSA, where
                   fp32 near-ties at the top-k boundary may pick different keys).
                   Compared: embedding, norms, MLA projections + RoPE + attention, dense MLP,
                   router (sigmoid, expert bias, top-k scaling), experts, shared expert, DSA
                   indexer + top-k selection + sparse attention, final norm, output layer.
                   Not compared: MTP (Megatron 0.16's GPTModel with MTP returns only losses),
                   document masks (Megatron's path here is causal over the whole row), the TE
                   spec (only when transformer_engine is importable).
  megatron_train   a few training steps of the 2-layer GLM-5-shaped model through training.megatron,
                   Megatron's own experts vs our grouped GEMM (megatron.experts): tokens/s, peak
                   memory, MFU, the grouped-GEMM ratio, the experts module alone
                   (training/tools/gpu_check_megatron.py)
  kernels          benchmarks/kernels_gpu.py (MoE Triton kernels: correctness + timings)
  hf_engine        our HF export (training.hf export) loaded by vLLM or SGLang where one imports,
                   else the report says neither does

Without CUDA it writes {"status": "skipped", ...} and exits 2; 0 when every section passed,
1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / "vendor" / "gpu-wheels"
SITE = ROOT / "vendor" / "gpu-site"
# distributions the GPU machine needs besides its own torch/triton (pinned to this venv's versions)
VENDORED = ["megatron-core", "pydantic", "pydantic-core", "annotated-types", "typing-extensions",
            "typing-inspection", "PyYAML", "packaging", "numpy", "safetensors"]  # fmt: skip
# the machine's own copy is fine whatever its version; others are unpacked unless the same version
# is importable (vendor/gpu-site goes first on sys.path, so ours wins over an older pydantic)
ANY_VERSION = {"numpy", "packaging", "typing_extensions"}
# max seconds each; together more than the default budget: a section gets min(its cap, what is left)
SECTIONS = {"install": 10, "megatron_config": 30, "megatron_logits": 110, "megatron_train": 150, "kernels": 120,
            "hf_engine": 60}  # fmt: skip


# -- vendored wheels ------------------------------------------------------------------------------
def _dist_name(wheel: Path) -> str:
    return wheel.name.split("-")[0]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def install_plan(wheels: Path, site: Path) -> list[dict]:
    """Per wheel in ``wheels``: unpack it into ``site`` or skip it (and why)."""
    plan = []
    for wheel in sorted(wheels.glob("*.whl")):
        name = _dist_name(wheel)
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = None
        unpacked = any(site.glob(f"{name}-*.dist-info")) if site.is_dir() else False
        if unpacked:
            plan.append({"wheel": wheel.name, "action": "skip", "why": f"already unpacked in {site.name}"})
            continue
        version = wheel.name.split("-")[1]
        if have and not unpacked and (have == version or _norm(name) in ANY_VERSION):
            plan.append({"wheel": wheel.name, "action": "skip", "why": f"{name} {have} already importable"})
        else:
            plan.append({"wheel": wheel.name, "action": "unpack"})
    return plan


def install(wheels: Path = WHEELS, site: Path = SITE) -> list[dict]:
    """Unpack what the plan says into ``site`` (wheels are zip files: no pip needed) and put
    ``site`` on sys.path and PYTHONPATH (for the section subprocesses)."""
    plan = install_plan(wheels, site)
    site.mkdir(parents=True, exist_ok=True)
    for step in plan:
        if step["action"] == "unpack":
            with zipfile.ZipFile(wheels / step["wheel"]) as z:
                z.extractall(site)
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return plan


def vendor(dest: Path = WHEELS) -> list[Path]:
    """Download the wheels for a Python 3.12 x86_64 Linux machine with this machine's pip
    (its own index configuration), pinned to the versions installed here."""
    specs = []
    for name in VENDORED:
        try:
            specs.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            specs.append(name)
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
           "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64",
           "--platform", "any", "-d", str(dest), *specs]  # fmt: skip
    subprocess.run(cmd, check=True)
    return sorted(dest.glob("*.whl"))


# -- sections (each runs in a subprocess: python -m training.tools.gpu_check --section NAME) ------------
def section_install() -> dict:
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "megatron-core", "transformer_engine"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    out["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return out


def section_megatron_config() -> dict:
    from training.tools.megatron_bridge import to_megatron_config
    from training.train_config import load_trainer_config

    cfg = load_trainer_config(ROOT / "configs/glm5_744b.yaml").model
    m = to_megatron_config(cfg)
    keys = ("num_layers", "hidden_size", "num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_head_dim",
            "qk_pos_emb_head_dim", "v_head_dim", "num_moe_experts", "moe_router_topk", "mtp_num_layers",
            "experimental_attention_variant", "dsa_indexer_n_heads", "dsa_indexer_head_dim", "dsa_indexer_topk")  # fmt: skip
    return {"class": type(m).__name__, **{k: getattr(m, k) for k in keys}}


def compare_logits(cfg, seq: int, spec: str = "local") -> dict:
    """Ours vs Megatron's GPTModel on the same converted weights (one CUDA device)."""
    import torch

    from training.model.glm import GLMModel
    from training.tools.megatron_bridge import build_megatron_model, to_megatron_state_dict

    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device("cuda"):
        ours = GLMModel(cfg).eval()
        with torch.no_grad():  # non-trivial router bias and indexer: routing and top-k matter
            for name, p in ours.named_parameters():
                if ".indexer." in name and p.ndim == 2:
                    p.normal_(std=0.3 / p.shape[1] ** 0.5 * 4)
            for layer in ours.moe_layers():
                layer.router.expert_bias.normal_(std=0.1)
    meg = build_megatron_model(cfg, spec=spec).cuda().eval()
    missing, unexpected = meg.load_state_dict(
        to_megatron_state_dict(cfg, ours.state_dict(), spec), strict=False
    )
    missing = [k for k in missing if not k.endswith("_extra_state")]
    toks = torch.randint(
        0, cfg.vocab_size, (1, seq), device="cuda", generator=torch.Generator("cuda").manual_seed(1)
    )
    with torch.no_grad():
        want = ours(toks, [torch.tensor([seq])])
        got = meg(toks, torch.arange(seq, device="cuda")[None], attention_mask=None).float()
        diff = (got - want).abs().max().item()
        scale = want.abs().max().item()
        out = {"spec": spec, "seq": seq, "max_abs_diff": diff, "max_abs_logit": scale,
               "rel": diff / scale if scale else None, "missing": missing[:20], "unexpected": unexpected[:20]}  # fmt: skip
        if cfg.dsa_indexer_n_heads:
            ours.set_dsa_dense(True)
            out["sparse_vs_dense_max_diff"] = (ours(toks, [torch.tensor([seq])]) - want).abs().max().item()
    # with DSA, fp32 (near-)ties at the top-k boundary may be broken differently by Megatron's
    # topk and our stable selection (a few swapped keys): a looser bound, and the numbers reported
    tol = 1e-2 if cfg.dsa_indexer_n_heads else 1e-4
    out["tolerance_rel"] = tol
    out["ok"] = not missing and not unexpected and out["rel"] is not None and out["rel"] < tol
    out["seconds"] = round(time.perf_counter() - t0, 2)
    del ours, meg
    torch.cuda.empty_cache()
    return out


def _tiny(**extra):
    from training.model.config import ModelConfig

    return ModelConfig(num_layers=3, hidden_size=32, ffn_hidden_size=64, num_attention_heads=4, vocab_size=64,
                       q_lora_rank=16, kv_lora_rank=16, qk_head_dim=8, qk_pos_emb_head_dim=8, v_head_dim=8,
                       num_moe_experts=4, moe_router_topk=2, moe_ffn_hidden_size=16,
                       moe_shared_expert_intermediate_size=16, moe_router_topk_scaling_factor=2.5,
                       moe_first_k_dense_layers=1, **extra)  # fmt: skip


def section_megatron_logits() -> dict:
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    from training.tools import megatron_local
    from training.tools.gpu_check_megatron import glm5_layer_config

    torch.backends.cuda.matmul.allow_tf32 = False  # compare in true fp32
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(0)
    out: dict = {"patched": megatron_local.patch_megatron_without_te()}
    cases = {
        "tiny-mla-moe": (_tiny(), 16),
        "tiny-mla-moe-dsa": (_tiny(dsa_indexer_n_heads=8, dsa_indexer_head_dim=16, dsa_indexer_topk=5), 16),
        "glm5-layers": (glm5_layer_config(dsa=False), 4096),
        "glm5-layers-dsa": (glm5_layer_config(), 4096),
    }
    if megatron_local.have_transformer_engine():
        out["te_spec"] = "run (transformer_engine importable)"
        cases["tiny-mla-moe-te"] = (_tiny(), 16)
    else:
        out["te_spec"] = "not run: transformer_engine is not installed (local spec only)"
    try:
        for name, (cfg, seq) in cases.items():
            try:
                out[name] = compare_logits(cfg, seq, "te" if name.endswith("-te") else "local")
            except Exception as e:  # one case failing must not hide the others
                out[name] = {
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}",
                    "trace": traceback.format_exc()[-2000:],
                }
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    out["ok"] = all(v.get("ok") for k, v in out.items() if isinstance(v, dict))
    return out


def section_kernels(budget: float) -> dict:
    path = ROOT / "out" / "gpu-check" / "kernels_gpu.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "kernels_gpu.py"), str(path), "--iters", "5"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=max(budget, 1))
    out = {
        "returncode": proc.returncode,
        "stdout_tail": proc.stdout[-3000:],
        "stderr_tail": proc.stderr[-3000:],
    }
    if path.is_file():
        out["result"] = json.loads(path.read_text())
    out["ok"] = proc.returncode == 0
    return out


# -- driver ---------------------------------------------------------------------------------------
def run_section(name: str, budget: float) -> dict:
    """Run one section in a subprocess (a crash, hang or CUDA fault stays inside it)."""
    t0 = time.perf_counter()
    out_file = ROOT / "out" / "gpu-check" / f".{name}.json"
    out_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "training.tools.gpu_check", "--section", name, "--section-out", str(out_file),
           "--budget-s", str(budget)]  # fmt: skip
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget + 15)
        res = json.loads(out_file.read_text()) if out_file.is_file() else {}
        if not res:
            res = {
                "ok": False,
                "error": f"exit {proc.returncode} without a result",
                "stderr": proc.stderr[-3000:],
            }
    except subprocess.TimeoutExpired:
        res = {"ok": False, "error": f"timed out after {budget:.0f} s"}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def run_all(out: Path, budget: float, sections: dict[str, float] | None = None, runner=run_section) -> dict:
    """Every section within the budget; the report is rewritten after each one."""
    t0 = time.perf_counter()
    report = {"status": "running", "budget_s": budget, "sections": {}}
    for name, cap in (sections or SECTIONS).items():
        left = budget - (time.perf_counter() - t0)
        if left < 5:
            report["sections"][name] = {"ok": False, "error": "skipped: time budget used up"}
            continue
        try:
            report["sections"][name] = runner(name, min(cap, left))
        except Exception as e:
            report["sections"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        report["elapsed_s"] = round(time.perf_counter() - t0, 1)
        _write(out, report)
    report["status"] = "ok" if all(s.get("ok") for s in report["sections"].values()) else "failed"
    report["elapsed_s"] = round(time.perf_counter() - t0, 1)
    _write(out, report)
    return report


def _write(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=str(ROOT / "out" / "gpu-check" / "report.json"),
                    help="report JSON, or 'vendor' to download the wheels into vendor/gpu-wheels")  # fmt: skip
    ap.add_argument("--budget-s", type=float, default=420.0, help="seconds for all sections together")
    ap.add_argument("--section", choices=sorted(SECTIONS), help=argparse.SUPPRESS)
    ap.add_argument("--section-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.out == "vendor":
        for w in vendor():
            print(f"{w.stat().st_size / 2**20:7.1f} MiB  {w.name}")
        return 0
    if a.section:  # inside a section subprocess
        install()
        from training.tools.gpu_check_megatron import section_hf_engine, section_megatron_train

        fn = {"install": section_install, "megatron_config": section_megatron_config,
              "megatron_logits": section_megatron_logits, "kernels": lambda: section_kernels(a.budget_s - 5),
              "megatron_train": section_megatron_train, "hf_engine": section_hf_engine}  # fmt: skip
        try:
            res = fn[a.section]()
            res.setdefault("ok", True)
        except Exception as e:
            res = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-3000:]}
        _write(Path(a.section_out), res)
        return 0
    plan = install()
    if importlib.util.find_spec("torch") is None:
        _write(Path(a.out), {"status": "failed", "reason": "torch is not importable", "install": plan})
        return 1
    import torch

    if not torch.cuda.is_available():
        _write(Path(a.out), {"status": "skipped", "reason": "no CUDA device", "install_plan": plan})
        print(f"skipped: no CUDA device -> {a.out}")
        return 2
    report = run_all(Path(a.out), a.budget_s)
    report["install_plan"] = plan
    _write(Path(a.out), report)
    print(json.dumps({k: v.get("ok") for k, v in report["sections"].items()}), f"-> {a.out}")
    return 0 if report["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
