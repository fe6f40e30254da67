"""Serving our model for rollouts.

``rollout_server``  HTTP server: OpenAI-compatible routes, token-in/out ``/generate``, weight updates
``engine``          continuous batching in chunks over ``training.rl.sampler``; partial rollouts
``codec``           tokenizer + GLM-5 chat template for prompts and replies
``rollout_client``  token-in/out calls to ours, SGLang or vLLM with one result shape
``http_json``       the small JSON-over-HTTP layer the servers and the orchestrator share
"""
