"""Base classes of github3.py objects."""

import requests


class GitHubCore(object):
    def __init__(self, json, session=None):
        self.session = session or requests.Session()
        self._api = json.get("url", "")

    def _json(self, response, status_code):
        return response.json() if response is not None and response.status_code == status_code else None

    @property
    def ratelimit_remaining(self):
        """Number of requests before GitHub imposes a ratelimit."""
        json = self._json(self.session.get("https://api.github.com/rate_limit"), 200)
        resources = json.get("resources", {})
        # search has its own, lower rate limit (GitHub API v3 docs)
        key = "search" if "/search/" in self._api else "core"
        self._remaining = resources.get(key, {}).get("remaining", 0)
        return self._remaining
