"""The orchestrator's side of session tasks (``swe``, ``terminal``): an episode is an environment
session held by one task-service replica (the job's ``home``), named by ``Job.episode_key`` in
every ``/step`` and ``/reward``. An episode that starts over (its generation aborted or failed, its
session lost, a step that failed half-way) or is given up (dropped, run ended) has its session
closed at once with ``POST /close``; the service's reaper and its shutdown back that up."""

from __future__ import annotations

import threading

from training.rl.rollout.groups import Job
from training.serving.http_json import call


class SessionEpisodes:
    """Mixed into ``Orchestrator``: uses its ``registry``."""

    def _restart(self, job: Job) -> None:
        """The episode starts over (partial tokens are not kept); a session task's session goes too."""
        self._close_episode(job)
        job.reset()

    def _close_episode(self, job: Job) -> None:
        slot = self.registry.slots.get(job.home) if job.group.session and job.home else None
        if slot is not None and slot.endpoint:  # best effort, off the caller's thread
            threading.Thread(target=call, args=(f"{slot.endpoint}/close", {"episode": job.episode_key}, 30),
                             daemon=True, name="close-episode").start()
