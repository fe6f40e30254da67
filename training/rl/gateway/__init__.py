"""The agent gateway: an OpenAI-compatible endpoint in front of the rollout servers that records
external agents' sessions token-in/token-out (``recorder``) and hands them to the trainer (``server``)."""
