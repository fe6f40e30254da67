"""Search results."""

from .models import GitHubCore


class SearchIterator(GitHubCore):
    def __init__(self, count, url, session=None):
        super(SearchIterator, self).__init__({"url": url}, session)
        self.count = count
