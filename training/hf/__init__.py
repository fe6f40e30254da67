"""Hugging Face checkpoints in and out: ``python -m training.hf export|import|config|logits``.

``config_map`` maps configs and lists every difference from transformers' implementations,
``weights`` maps state dicts, ``convert`` reads and writes the directories."""
