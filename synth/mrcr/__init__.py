"""MRCR-like multi-round co-reference data: generation (``generate``), grading (``grade``),
and the ``python -m synth.mrcr`` command line."""

from synth.mrcr.generate import MrcrConfig, generate, generate_sample, render_chat
from synth.mrcr.grade import grade, grade_files
from synth.mrcr.passages import PassageConfig, passage_pool

__all__ = [
    "MrcrConfig",
    "PassageConfig",
    "generate",
    "generate_sample",
    "grade",
    "grade_files",
    "passage_pool",
    "render_chat",
]
