"""A transformers causal LM as a policy (training.policy.hf): a tiny random LlamaForCausalLM made by
transformers itself with the real SmolLM2 tokenizer and chat template. Sampling with the KV cache
gives the logprobs a fresh full forward gives; a group-wise RL update changes the weights and the
sampler then agrees with the updated model; checkpoints round-trip and push as weights."""

from __future__ import annotations

import torch

from training.policy import as_policy, checkpoint_kind, load_policy
from training.rl.algo.losses import pad_rows, token_logprobs
from training.rl.algo.update import UpdateConfig, policy_update, rl_advantages
from training.rl.trajectory import Trajectory
from training.serving.sampler import SamplingParams, sample


def _prompts(policy) -> list[list[int]]:
    codec = policy.codec
    return [codec.chat_prompt([{"role": "user", "content": q}]) for q in ("What is 2 + 3?", "Hi", "What is 12 - 7? Answer.")]


def _sampled_vs_forward(policy, prompts, seed=0) -> tuple[list, torch.Tensor, torch.Tensor]:
    outs = sample(policy, prompts, SamplingParams(temperature=1.0, max_tokens=6), torch.Generator().manual_seed(seed))
    rows = [p + o.tokens for p, o in zip(prompts, outs, strict=True)]
    tokens, doc_lens = pad_rows(rows)
    with torch.no_grad():
        lp = token_logprobs(policy.eval(), tokens, doc_lens, 1.0)
    got = torch.cat([torch.tensor(o.logprobs) for o in outs])
    want = torch.cat([lp[i, len(p):len(p) + len(o.tokens)] for i, (p, o) in enumerate(zip(prompts, outs, strict=True))])
    return outs, got, want


def test_kv_cached_sampling_gives_the_logprobs_of_a_fresh_forward(tiny_hf):
    policy = load_policy(tiny_hf)
    assert policy.kind == "hf" and policy.codec.stop_ids  # <|im_end|> from the tokenizer
    prompts = _prompts(policy)
    assert len({len(p) for p in prompts}) == 3  # left padding is exercised
    outs, got, want = _sampled_vs_forward(policy, prompts)
    assert all(o.tokens for o in outs)
    assert torch.allclose(got, want, atol=1e-4), (got - want).abs().max()
    # a row alone samples what it samples in the batch (greedy: no randomness)
    greedy = SamplingParams(temperature=0.0, max_tokens=5)
    batch = sample(policy, prompts, greedy)
    alone = [sample(policy, [p], greedy)[0] for p in prompts]
    assert [o.tokens for o in batch] == [o.tokens for o in alone]


def test_an_rl_update_changes_the_weights_and_the_sampler_follows(tiny_hf):
    from training.optim.optimizers import OptimizerConfig

    policy = load_policy(tiny_hf)
    before = {k: v.clone() for k, v in policy.module.state_dict().items()}
    prompts = _prompts(policy)[:2]
    outs = sample(policy, [p for p in prompts for _ in range(4)], SamplingParams(temperature=1.0, max_tokens=6),
                  torch.Generator().manual_seed(1))
    trajs = []
    for i, o in enumerate(outs):
        t = Trajectory(str(i), "t", str(i // 4), prompts[i // 4])
        t.add_turn(o.tokens, o.logprobs, [0] * len(o.tokens))
        t.reward = float(i % 4)  # rewards differ inside each group: non-zero advantages
        trajs.append(t)
    opt = policy.optimizer(OptimizerConfig(name="adamw", lr=1e-2, weight_decay=0.0))
    stats = policy_update(policy, opt, trajs, rl_advantages(trajs, 4, UpdateConfig().loss), UpdateConfig())
    assert stats["rollout_trainer_logp_diff"] < 1e-4  # the rollout's logprobs were the trainer's
    changed = [k for k, v in policy.module.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "no weight moved"
    _, got, want = _sampled_vs_forward(policy, prompts, seed=2)
    assert torch.allclose(got, want, atol=1e-4)


def test_save_load_and_weight_push_round_trip(tiny_hf, tmp_path):
    from safetensors.torch import load_file

    policy = load_policy(tiny_hf)
    with torch.no_grad():
        next(policy.module.parameters()).add_(0.5)  # not the directory's weights any more
    step = policy.save(tmp_path / "ckpt", 3, None, {"stage": "x"})
    assert checkpoint_kind(tmp_path / "ckpt") == ("hf", step)  # a directory of step-* resolves to the latest
    back = load_policy(tmp_path / "ckpt")
    ids = torch.tensor([_prompts(policy)[0]])
    lens = [torch.tensor([ids.shape[1]])]
    with torch.no_grad():
        assert torch.equal(back.eval()(ids, lens), policy.eval()(ids, lens))
    assert back.codec.tok.chat_template == policy.codec.tok.chat_template
    # pushed weights: save_pretrained writes the tied embedding once; the policy accepts that
    fresh = load_policy(tiny_hf)
    fresh.load_weights(load_file(step / "model.safetensors"))
    with torch.no_grad():
        assert torch.equal(fresh.eval()(ids, lens), policy(ids, lens))


def test_a_bare_glm_model_is_a_policy():
    from tests.training.glm_tiny import tiny_model
    from training.model.glm import GLMModel

    model = GLMModel(tiny_model(vocab_size=32, mtp_num_layers=None))
    policy = as_policy(model)
    assert policy.module is model and as_policy(policy) is policy and policy.vocab_size == 32
