"""Data that is built, not found: long-context samples (natural selection, NExtLong
interleaving, EntropyLong verification), MRCR-like conversations. Never imports pipelines/ or
training/."""
