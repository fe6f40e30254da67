"""Kernel tests run the real Triton kernels: compiled on a CUDA GPU when there is one,
otherwise on CPU tensors under Triton's interpreter.

``TRITON_INTERPRET`` must be set before *triton itself* is first imported (triton's own
``tl.sigmoid``, ``tl.sum``... are ``@triton.jit`` functions defined at its import), and the
kernels must be defined while it is set. So on a CPU-only machine this conftest sets it,
imports triton, its lazily imported gluon package (which checks the mode at the first
launch) and our kernel modules, then restores the variable so nothing else in the session
(or its subprocesses) sees it. If another test module imported triton earlier in this
session, that is impossible; then ``IN_PROCESS`` is False, the kernel tests skip here and
``test_in_subprocess.py`` runs this directory in a fresh interpreter instead.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

ON_GPU = torch.cuda.is_available()
DEVICE = torch.device("cuda" if ON_GPU else "cpu")

if not ON_GPU and "triton" not in sys.modules:
    _previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton.experimental.gluon  # noqa: F401

        import moe_kernels.compile_check  # noqa: F401  (imports every kernel module)
        import moe_kernels.moe_backend  # noqa: F401
    finally:
        if _previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = _previous

from moe_kernels.runtime import interpreting  # noqa: E402

IN_PROCESS = ON_GPU or interpreting()
needs_kernels = pytest.mark.skipif(
    not IN_PROCESS,
    reason="triton was imported before the interpreter could be enabled: see test_in_subprocess",
)


@pytest.fixture(autouse=True)
def one_thread():
    # tiny shapes: more threads only add contention on shared CI cores
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
