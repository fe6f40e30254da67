import torch

from training.model.doc_mask import document_causal_mask, document_positions, segment_ids


def test_masks_and_positions_follow_documents():
    seg = segment_ids([torch.tensor([2, 3]), torch.tensor([5])], 5)
    assert seg.tolist() == [[0, 0, 1, 1, 1], [0, 0, 0, 0, 0]]
    assert document_positions(seg).tolist() == [[0, 1, 0, 1, 2], [0, 1, 2, 3, 4]]
    m = document_causal_mask(seg)[0, 0]
    assert m[3].tolist() == [False, False, True, True, False]
