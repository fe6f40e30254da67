"""Where the Triton kernels can run: a CUDA GPU, or anywhere under Triton's interpreter.

``TRITON_INTERPRET=1`` is read by ``@triton.jit`` when a kernel is *defined*, and triton's
own library functions (``tl.sum``, ``tl.sigmoid``...) are defined when triton is first
imported, so it must be set before anything in the process imports triton
(tests/moe_kernels/conftest.py does that). Kernels defined without it are compiled for the GPU
and cannot touch CPU tensors; ``check_device`` turns the otherwise cryptic Triton error into
one line that says what to do.
"""

from __future__ import annotations

import torch
import triton


@triton.jit
def _probe():
    # Defined when this module is first imported, which every kernel module does before
    # defining its own kernels: it was jitted under the same TRITON_INTERPRET as they were,
    # so it answers for them without this module importing any of them.
    pass


def interpreting() -> bool:
    """True when this process's kernels were defined under ``TRITON_INTERPRET=1``."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(_probe, InterpretedFunction)


def unavailable_reason() -> str | None:
    """None when the kernels can run here, otherwise why not (for a config error)."""
    if interpreting() or torch.cuda.is_available():
        return None
    return (
        f"the Triton kernels (triton {triton.__version__}) need a CUDA GPU, or TRITON_INTERPRET=1 set "
        "before triton is first imported (slow; for tests). Use moe_backend: torch on CPU"
    )


def check_device(t: torch.Tensor) -> None:
    # meta tensors pass: moe_kernels.compile_check runs the wrappers on them to record launches
    if t.device.type not in ("cuda", "meta") and not interpreting():
        raise RuntimeError(
            f"a {t.device} tensor was given to a compiled Triton kernel: move it to CUDA, or set "
            "TRITON_INTERPRET=1 before triton is first imported (slow; for tests)"
        )
