"""Issue–PR mining (GLM-5 SWE data): parsing, linking, filters, relevant files, formats.

Inputs are parsed into observations (``events``, ``api_dumps``, ``git_history`` via
``github_objects``), merged per entity (``entities``), joined into (issue, PR) pairs by the
linking SQL (``link_sql``) on either engine (``engine_duckdb``, ``engine_spark``; the stage
order is ``stages``), then judged here: ``repo_issue_filters`` (relaxed repository filter,
strict issue filter), ``patches`` (exact diff, read by ``swe_envs.diff``; test/code split by
``swe_envs.paths``), dedup and ``decontam`` (the one MinHash, ``filters.minhash``),
``relevant_files`` and ``document`` (training text; SWE-bench instances in the schema of
``swe_envs.instance``).
Nothing here imports ``pipelines`` or ``training``.
"""
