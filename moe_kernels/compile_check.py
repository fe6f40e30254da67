"""Compile every Triton kernel for an NVIDIA GPU architecture, without a GPU.

Triton ships ``ptxas``, so its compiler runs anywhere. This runs the real wrappers (forward
and backward of router, permute, unpermute, expert FFN) on meta tensors at GLM-5 shapes,
records each kernel launch they make instead of launching it, and compiles every distinct
launch to a cubin with the specialisation Triton's JIT would apply (16-byte-aligned pointers,
integers divisible by 16, integers equal to 1 become constants). It catches what the CPU
interpreter cannot: code that does not lower, tiles that do not fit shared memory, GEMMs
that miss tensor cores or software pipelining. Must run without ``TRITON_INTERPRET``.

    python -m moe_kernels.compile_check --arch 90 [--dtype bf16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import CUDABackend
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from moe_kernels import grouped_gemm, permute, router
from moe_kernels.runtime import interpreting

MODULES = (router, permute, grouped_gemm)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class _Recorder:
    """Stands in for a JITFunction: ``kernel[grid](*args, **kw)`` records instead of launching."""

    def __init__(self, fn: JITFunction):
        self.fn = fn
        self.launches: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.launches.append((args, kw))


@contextmanager
def recording():
    recs = {
        (m, name): _Recorder(obj)
        for m in MODULES
        for name, obj in vars(m).items()
        if isinstance(obj, JITFunction)
    }
    for (m, name), rec in recs.items():
        setattr(m, name, rec)
    try:
        yield list(recs.values())
    finally:
        for (m, name), rec in recs.items():
            setattr(m, name, rec.fn)


def run_wrappers(tokens: int, hidden: int, ffn: int, experts: int, topk: int, dtype: torch.dtype) -> None:
    """Forward + backward of every kernel wrapper on meta tensors (nothing is computed)."""
    meta = {"device": "meta"}
    logits = torch.empty(tokens, experts, **meta, requires_grad=True)
    gates, ids, scores, _ = router.route(logits, topk, "sigmoid", torch.empty(experts, **meta), 8, 4, 2.5)
    (gates.sum() + scores.sum()).backward()
    x = torch.empty(tokens, hidden, **meta, dtype=dtype, requires_grad=True)
    x_perm, order, counts = permute.permute(x, ids, experts)
    w1 = torch.empty(experts, 2 * ffn, hidden, **meta, dtype=dtype, requires_grad=True)
    w2 = torch.empty(experts, hidden, ffn, **meta, dtype=dtype, requires_grad=True)
    y = grouped_gemm.expert_ffn(x_perm, counts, w1, w2)
    permute.unpermute(y, order, gates.detach().requires_grad_()).sum().backward()


def specialise(fn: JITFunction, args: tuple, kw: dict) -> tuple[dict, dict, dict, dict]:
    """(signature, constexprs, attrs, options) as Triton's JIT would build them for this launch."""
    values = dict(zip(fn.arg_names, args, strict=False)) | {k: v for k, v in kw.items() if k in fn.arg_names}
    options = {k: v for k, v in kw.items() if k not in fn.arg_names}
    sig, consts, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        v = values[p.name]
        if p.is_constexpr:
            sig[p.name], consts[p.name] = "constexpr", v
            continue
        ty, spec = triton._C.libtriton.native_specialize_impl(CUDABackend, v, False, True, True)
        if ty == "constexpr":
            sig[p.name], consts[p.name] = "constexpr", spec
        else:
            sig[p.name] = ty
            if spec == "D":
                attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs, options


def compile_all(arch: int, **shape) -> list[dict]:
    with recording() as recs:
        run_wrappers(**shape)
    results, seen = [], set()
    for rec in recs:
        for args, kw in rec.launches:
            sig, consts, attrs, options = specialise(rec.fn, args, kw)
            key = (
                rec.fn.__name__,
                tuple(sig.items()),
                tuple(map(str, consts.items())),
                tuple(options.items()),
            )
            if key in seen:
                continue
            seen.add(key)
            t0 = time.perf_counter()
            k = triton.compile(
                ASTSource(rec.fn, sig, consts, attrs), target=GPUTarget("cuda", arch, 32), options=options
            )
            ptx = k.asm["ptx"]
            results.append(
                {
                    "kernel": rec.fn.__name__,
                    "signature": ",".join(v for v in sig.values() if v != "constexpr"),
                    "constexprs": {n: str(v) for n, v in consts.items()},
                    "shared_bytes": k.metadata.shared,
                    "num_warps": k.metadata.num_warps,
                    "tensor_cores": "wgmma" in ptx or "mma.sync" in ptx,
                    "async_copies": "cp.async" in ptx,
                    "cubin_bytes": len(k.asm["cubin"]),
                    "compile_s": round(time.perf_counter() - t0, 2),
                }
            )
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="SM version, e.g. 80 (A100), 90 (H100/H200)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="activation/weight dtype")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--ffn", type=int, default=2048, help="expert FFN size")
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if interpreting():
        print(
            "compile_check: unset TRITON_INTERPRET (kernels were defined for the interpreter)",
            file=sys.stderr,
        )
        return 2
    shape = dict(
        tokens=a.tokens, hidden=a.hidden, ffn=a.ffn, experts=a.experts, topk=a.topk, dtype=DTYPES[a.dtype]
    )
    results = compile_all(a.arch, **shape)
    for r in results:
        flags = ("tensor cores " if r["tensor_cores"] else "") + ("cp.async" if r["async_copies"] else "")
        print(
            f"{r['kernel']:16s} sm_{a.arch} {r['shared_bytes']:7d} B shared  {r['compile_s']:5.1f} s  {flags}"
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"arch": a.arch, "dtype": a.dtype, "kernels": results}, fh, indent=1)
    print(f"{len(results)} kernel variants compiled for sm_{a.arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
