"""moe_kernels/runtime.py stands alone: it imports nothing from the package, and its probe kernel
answers ``interpreting()`` exactly as the real kernels are defined, with or without the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
import moe_kernels.runtime as runtime
answer = runtime.interpreting()
alone = sorted(m for m in sys.modules if m.startswith("moe_kernels."))  # after the call: no lazy import either
from triton.runtime.interpreter import InterpretedFunction
from moe_kernels import permute
print(alone, answer, isinstance(permute._gather_rows, InterpretedFunction))
"""


def _run(interpret: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_runtime_alone_and_its_probe_agrees_with_the_kernels():
    assert _run(interpret=True) == "['moe_kernels.runtime'] True True"
    assert _run(interpret=False) == "['moe_kernels.runtime'] False False"
