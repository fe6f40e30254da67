from github3.models import GitHubCore


class FakeSession(object):
    def get(self, url):
        return FakeResponse()


class FakeResponse(object):
    status_code = 200

    def json(self):
        return {"resources": {"core": {"remaining": 4999}, "search": {"remaining": 29}}}


def test_core_ratelimit():
    assert GitHubCore({"url": "https://api.github.com/users/x"}, FakeSession()).ratelimit_remaining == 4999


def test_search_ratelimit():
    core = GitHubCore({"url": "https://api.github.com/search/issues"}, FakeSession())
    assert core.ratelimit_remaining == 29
