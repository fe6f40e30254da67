"""Optimizers: ``muon`` (Muon / MuonSplit + AdamW in one optimizer), ``optimizers`` (which
parameter gets which, and QK-clip), ``schedules`` (warmup, cosine / WSD / constant)."""
