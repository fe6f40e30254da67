"""Entry point for ``python -m pipelines``.

The guard matters: datatrove's local executor starts workers through forkserver, which
re-imports the main module.
"""

from pipelines.cli import app

if __name__ == "__main__":
    app(prog_name="python -m pipelines")
