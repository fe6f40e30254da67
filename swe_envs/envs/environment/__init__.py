"""One repo-version's environment: built, refined and verified once, then reused.

``builder`` (``EnvBuilder``: the recipe's rounds, the collect check, the verified image and its
spec, ``Environment``), ``group`` (the builder wired from the config, and one repo-version group's
environment as validate and evaluate both build it), ``own_runners`` (a repository's own test
runner where pytest collects nothing), ``network_needs`` (a log that says the tests need a network).
"""
