"""SWE data and environments: four wings over one shared core.

Wings: ``mining`` (issue-PR mining -> SWE-bench instances), ``envs`` (Dockerized SWE-bench
environments, validation, evaluation, log parsers), ``terminal`` (Harbor tasks: convert, run,
check, synthesize) and ``sessions`` (SWE instances and Harbor tasks as tool-call sessions, opened
through the other wings' entry points). The shared core, which imports no wing, is here: the
instance schema (``instance``), the one diff parser (``diff``), git wrapper (``git``), test/source
classifier (``paths``), repository reading (``repos``), the Docker plumbing (``docker_setup``,
``images``, ``sandbox``, ``registry``, ``untrusted_network``, ``disk_guard``), ``offline``
(Debian's crates and jars for builds with no registry), ``config`` and ``fanout``; ``cli``
dispatches ``python -m swe_envs`` to the wings.
"""
