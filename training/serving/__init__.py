"""Serving our model for rollouts. Imports nothing of ``training.rl``: the RL system builds on it.

``sampler``         batched token-in/token-out sampling with the MLA latent KV cache
``batcher``         continuous batching in chunks over ``sampler``; partial rollouts
``rollout_server``  HTTP server: OpenAI-compatible routes, token-in/out ``/generate``, weight updates
(the chat codecs, tokenizer + template, are ``training.policy.codec``: a policy carries its own)
``rollout_client``  token-in/out calls to ours, SGLang or vLLM with one result shape
``http_json``       the small JSON-over-HTTP layer the servers and the orchestrator share
``faults``          slow and garbled replies injected by a server, and the ``faults.jsonl`` log
"""
