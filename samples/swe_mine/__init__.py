"""Sample inputs for ``swe-mine`` (``make data-swe``, tests, benchmarks).

* Real API objects (``recordings.py``): github3.py's sdist ships ~400 recorded GitHub API
  responses (``tests/cassettes/*.json``), fetched once with ``pip download`` into the cache's ``github3/``.
* GH-Archive-style events (``recordings.py``): every event recorded in those cassettes
  (IssuesEvent, PullRequestEvent, IssueCommentEvent, …), de-duplicated and written as hourly
  ``YYYY-MM-DD-H.json.gz`` files, as GH Archive names them.
* Git repositories (``repos.py``) for three real issue→PR pairs found in the recordings
  (requests/toolbelt #199→#200 merged with a merge commit, PyCQA/pyflakes #290→#313 merged
  with a merge commit whose branch commit says "Fixes #290", sigmavirus24/github3.py
  #775→#776 squash-merged), replayed with ``git`` (``gitrepo.py``) at the recorded dates from
  ``repos/<owner>/<name>/history.yaml``. Their file contents are small stand-ins (a source file
  and a test changed by each PR), since the real repositories cannot be fetched here. Each also
  has an unlinked PR or a direct commit closing an issue, so every link outcome occurs.

Run ``python -m samples swe-mine [--cache DIR]`` to build everything in the cache (``build.py``).
"""
