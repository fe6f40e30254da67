"""Environment sessions: SWE instances and Harbor tasks as containers that agents' tool calls run in."""
