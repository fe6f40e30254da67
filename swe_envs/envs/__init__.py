"""SWE-bench environments: per repo-version Docker images, test runs before and after the fix,
log parsers, validation (F2P / P2P) and the evaluation harness.

``validate_job`` is ``python -m swe_envs validate`` (instances + clones -> validated
instances), ``builder`` builds and refines one environment (rules in ``build_rules``, era in
``era``, per-language recipes in ``languages``), ``validator`` validates one instance in it,
``evaluate`` grades predictions, ``parsers`` / ``llm_parser`` read test logs. The Docker
plumbing they share with ``swe_envs.terminal`` (engine setup, images, sandbox, registry
access) is in ``swe_envs`` itself.
"""
