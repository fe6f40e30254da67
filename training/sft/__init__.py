"""Supervised fine-tuning: chat data readers, category mixing, packing with loss masks, training."""
