"""Errors that carry a user-facing one-line message.

CLIs catch ``UserError`` and print its message without a traceback: bad configs, missing
inputs and corrupt shards are the user's to fix, not bugs to debug.
"""


class UserError(Exception):
    """An error caused by input, config or environment; its message says what to do."""


class ConfigError(UserError):
    """A config file or value is invalid; the message names the key."""


class InputError(UserError):
    """An input path is missing or unreadable; the message names the file."""


class ShardError(UserError):
    """A shard directory or file fails its manifest checks."""


class StepError(RuntimeError):
    """A pipeline step raised; the message names the stage and the document."""
