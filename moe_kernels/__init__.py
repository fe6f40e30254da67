"""MoE kernels in Triton, each with a pure-torch reference of the same signature.

    moe_kernels.reference     the references (pure torch; what tests and gradcheck hold the kernels to)
    moe_kernels.router        fused scores + bias-steered (group-limited) top-k + gates + counts
    moe_kernels.permute       dropless counting-sort permute / gated unpermute
    moe_kernels.grouped_gemm  one-launch grouped GEMM (forward, dX, dW) and the SwiGLU expert FFN
    moe_kernels.moe_backend   the four steps ``training.model.moe`` plugs in for ``moe_backend: triton``
    moe_kernels.runtime       where the kernels can run (CUDA, or Triton's interpreter) and the checks
    moe_kernels.compile_check compile every kernel for an NVIDIA arch with Triton's ptxas, no GPU needed

Nothing is imported here on purpose: ``@triton.jit`` decides between compiling and
interpreting when a kernel module is imported (``TRITON_INTERPRET``, see moe_kernels/runtime.py),
so importing ``moe_kernels.reference`` must not define any kernel.
"""
