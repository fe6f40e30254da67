"""The trainer side of asynchronous RL: one run's supervisor and the trainer process.

``run``      ``python -m training.rl train``: the initial checkpoint, the orchestrator, the trainer
             process (restarted from its checkpoint if it dies), the ledger audit at the end
``process``  the trainer: threshold batches in, staleness bound, one policy update
             (``training.rl.algo.update``), weight versions out, commits to the ledger
``config``   the RL run's YAML (``configs/rl_async_tiny.yaml``): model, trainer, orchestrator
"""
