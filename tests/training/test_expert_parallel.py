"""Expert parallelism over 2 real gloo ranks on 127.0.0.1 vs the single-process MoE layer."""

import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.training.glm_tiny import tiny_model
from training.model.moe import MoELayer

CFG = dict(num_moe_experts=4, moe_router_topk=2, hidden_size=32, moe_ffn_hidden_size=16)


def reference_layer() -> MoELayer:
    torch.manual_seed(0)
    m = MoELayer(tiny_model(**CFG))
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.3)
    m.router.weight.data[3] += 1.0  # skew the load: rank 1 (experts 2, 3) gets more rows
    return m


def tokens_of(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(2, 5 + 3 * rank, 32, generator=g)  # ranks hold different numbers of tokens


def worker(rank: int, port: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        ref = reference_layer()
        ep = MoELayer(tiny_model(**CFG), ep_group=dist.group.WORLD)
        lo, hi = rank * 2, rank * 2 + 2
        with torch.no_grad():
            ep.router.weight.copy_(ref.router.weight)
            ep.shared_experts.load_state_dict(ref.shared_experts.state_dict())
            ep.experts.linear_fc1.weight.copy_(ref.experts.linear_fc1.weight[lo:hi])
            ep.experts.linear_fc2.weight.copy_(ref.experts.linear_fc2.weight[lo:hi])
        x = tokens_of(rank).requires_grad_()
        y, _ = ep(x)
        (y * torch.arange(y.numel()).view_as(y).sin()).sum().backward()
        torch.save(
            {
                "y": y.detach(),
                "x_grad": x.grad,
                "w1_grad": ep.experts.linear_fc1.weight.grad,
                "w2_grad": ep.experts.linear_fc2.weight.grad,
            },
            f"{out_dir}/rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_all_to_all_dispatch_matches_single_process(tmp_path):
    mp.spawn(worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    ref = reference_layer()
    w1_grad = torch.zeros_like(ref.experts.linear_fc1.weight)
    w2_grad = torch.zeros_like(ref.experts.linear_fc2.weight)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        x = tokens_of(rank).requires_grad_()
        ref.zero_grad()
        y, _ = ref(x)
        (y * torch.arange(y.numel()).view_as(y).sin()).sum().backward()
        assert torch.allclose(got["y"], y.detach(), atol=1e-5)
        assert torch.allclose(got["x_grad"], x.grad, atol=1e-5)
        w1_grad += ref.experts.linear_fc1.weight.grad
        w2_grad += ref.experts.linear_fc2.weight.grad
    # each rank's expert gradients are the full-data gradients of the experts it owns
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert torch.allclose(got["w1_grad"], w1_grad[rank * 2 : rank * 2 + 2], atol=1e-4)
        assert torch.allclose(got["w2_grad"], w2_grad[rank * 2 : rank * 2 + 2], atol=1e-4)
