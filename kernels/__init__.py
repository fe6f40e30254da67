"""MoE kernels in Triton, each with a pure-torch reference of the same signature.

    kernels.reference     the references (pure torch; what tests and gradcheck hold the kernels to)
    kernels.router        fused scores + bias-steered (group-limited) top-k + gates + counts
    kernels.permute       dropless counting-sort permute / gated unpermute
    kernels.grouped_gemm  one-launch grouped GEMM (forward, dX, dW) and the SwiGLU expert FFN
    kernels.moe_backend   the four steps ``training.model.moe`` plugs in for ``moe_backend: triton``
    kernels.runtime       where the kernels can run (CUDA, or Triton's interpreter) and the checks
    kernels.compile_check compile every kernel for an NVIDIA arch with Triton's ptxas, no GPU needed

Nothing is imported here on purpose: ``@triton.jit`` decides between compiling and
interpreting when a kernel module is imported (``TRITON_INTERPRET``, see kernels/runtime.py),
so importing ``kernels.reference`` must not define any kernel.
"""
