"""Document masking for packed sequences, shared by every model that reads the shard contract.

A packed row holds several documents (``doc_lens``); attention must stay inside a document
and positions restart at each document, so a packed batch trains like separate documents.
"""

from __future__ import annotations

import torch


def segment_ids(doc_lens: list[torch.Tensor], seq_len: int) -> torch.Tensor:
    return torch.stack(
        [torch.repeat_interleave(torch.arange(len(dl)), dl.long(), output_size=seq_len) for dl in doc_lens]
    )


def document_positions(segments: torch.Tensor) -> torch.Tensor:
    """Position of each token inside its own document segment (restarts at 0)."""
    B, L = segments.shape
    idx = torch.arange(L).expand(B, L)
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    first = torch.where(starts, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return idx - first


def document_causal_mask(segments: torch.Tensor) -> torch.Tensor:
    """(B, 1, L, L) bool: True where query i may attend key j (same document, j <= i)."""
    L = segments.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    same = segments[:, :, None] == segments[:, None, :]
    return (same & causal)[:, None]
