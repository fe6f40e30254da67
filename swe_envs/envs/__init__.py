"""SWE-bench environments: per repo-version Docker images, test runs before and after the fix,
log parsers, validation (F2P / P2P) and the evaluation harness.

Where things are:
- ``languages/``: what each of the 9 languages installs (the recipe) and how its tests run;
- ``rules/``: what decides a recipe beyond that: the toolchain era, and the repairs tried after a
  failed build (one module per language; ``RULES_VERSION`` keys every verified environment);
- ``environment/``: one repo-version's environment built, refined and verified (``builder``),
  as validate and evaluate both build it (``group``);
- ``validate/``: ``python -m swe_envs validate`` (``job``) and one instance's validation (``validator``);
- ``evaluate``: ``python -m swe_envs evaluate``, the evaluation harness;
- ``parsers/``: test logs -> statuses (built-in, ``llm``-written), and ``test_ids`` in a dataset's scheme.
The Docker plumbing they share with ``swe_envs.terminal`` (engine setup, images, sandbox, registry
access, Debian stand-ins in ``swe_envs.offline``) is in ``swe_envs`` itself.
"""
