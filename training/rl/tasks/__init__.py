"""RL tasks: what is rolled out and how it is rewarded.

``toy``      verifiable toy tasks with programmatic rewards (copy/sort/reverse/shift, the multi-turn
             ``lookup`` tool task) and their vocabulary — the stage runner's tasks, and a task service kind
``backends`` what a task service serves: instances, observations, rewards from the project's real
             graders and harnesses (toy, search, swe, terminal)
``service``  one task's backend as an HTTP process (``python -m training.rl task-service``)
"""
