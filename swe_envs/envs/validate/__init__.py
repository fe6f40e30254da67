"""Validation: run each instance's tests before and after its fix in its environment.

``job`` is ``python -m swe_envs validate`` (``validate_instances``: instances + clones ->
validated instances, failures, environments, summary); ``validator`` validates one instance
(FAIL_TO_PASS / PASS_TO_PASS, the fake-pass guards).
"""
