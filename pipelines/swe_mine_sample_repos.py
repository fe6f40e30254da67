"""The sample git clones for ``swe_mine_sample``: histories at the dates GitHub recorded.

Each function builds ``root/owner/name`` with ``origin`` set to the GitHub repository, so
the miner names it like the API does. Contents are small stand-ins for the real files: the
PR changes a source file and its test, as the real PRs did.
"""

from __future__ import annotations

from pathlib import Path

from pipelines.swe_mine_sample import commit_files, git, init_repo, merge_pr

DECODER = '''"""Multipart response decoding."""

from .encoder import encode_with


class NonMultipartContentTypeException(Exception):
    pass


class MultipartDecoder(object):
    def __init__(self, content, content_type, encoding="utf-8"):
        self.content_type = content_type
        self.encoding = encoding
        self.parts = tuple()
        self._find_boundary()
        self._parse_body(content)

    def _find_boundary(self):
        ct_info = tuple(x.strip() for x in self.content_type.split(";"))
        mimetype = ct_info[0]
        if {CHECK}:
            raise NonMultipartContentTypeException("Unexpected mimetype in content-type header: {0}".format(mimetype))
        for item in ct_info[1:]:
            attr, value = item.split("=", 1)
            if attr.lower() == "boundary":
                self.boundary = encode_with(value.strip('"'), self.encoding)

    def _parse_body(self, content):
        self.parts = tuple(p for p in content.split(b"--" + self.boundary) if p.strip(b"-\\r\\n"))
'''
ENCODER = '''"""Multipart encoding helpers."""


def encode_with(string, encoding):
    if not (string is None or isinstance(string, bytes)):
        return string.encode(encoding)
    return string
'''
DECODER_TEST = """from requests_toolbelt.multipart.decoder import MultipartDecoder, NonMultipartContentTypeException


def test_boundary_is_found():
    d = MultipartDecoder(b"--abc\\r\\nx\\r\\n--abc--", "multipart/related; boundary=abc")
    assert d.boundary == b"abc"


def test_rejects_non_multipart():
    try:
        MultipartDecoder(b"", "text/plain")
    except NonMultipartContentTypeException:
        return
    raise AssertionError("text/plain accepted")
"""
UPPERCASE_TEST = """

def test_uppercase_multipart_content_type():
    d = MultipartDecoder(b"--abc\\r\\nx\\r\\n--abc--", "Multipart/Related; boundary=abc")
    assert d.boundary == b"abc"
"""


def toolbelt(root: Path) -> Path:
    """requests/toolbelt: issue #199 fixed by PR #200 (merge commit)."""
    repo = init_repo(root / "requests" / "toolbelt", "requests/toolbelt")
    base = {
        "README.rst": "requests-toolbelt\n=================\n\nA toolbelt of useful classes and functions for requests.\n",
        "requests_toolbelt/__init__.py": '"""requests-toolbelt."""\n__version__ = "0.8.0"\n',
        "requests_toolbelt/multipart/__init__.py": "from .decoder import MultipartDecoder\nfrom .encoder import encode_with\n",
        "requests_toolbelt/multipart/encoder.py": ENCODER,
        "requests_toolbelt/multipart/decoder.py": DECODER.replace(
            "{CHECK}", "mimetype.split('/')[0] != 'multipart'"
        ),
        "tests/test_multipart_decoder.py": DECODER_TEST,
    }
    commit_files(repo, base, "Add multipart decoder", "2017-10-02T10:00:00Z", "sigmavirus24")
    commit_files(
        repo,
        {"README.rst": base["README.rst"] + "\nSee the docs.\n"},
        "Point to the docs, closes #150",
        "2017-10-20T09:00:00Z",
    )
    git(repo, "checkout", "-q", "-b", "bug/199")
    fixed = DECODER.replace("{CHECK}", "mimetype.split('/')[0].lower() != 'multipart'")
    commit_files(
        repo,
        {
            "requests_toolbelt/multipart/decoder.py": fixed,
            "tests/test_multipart_decoder.py": DECODER_TEST + UPPERCASE_TEST,
        },
        "Fix bug/199, enabling support for contenttype with capital letters.",
        "2017-11-21T00:18:00Z",
        "Kefevs",
    )
    merge_pr(
        repo,
        "bug/199",
        200,
        "Kefevs",
        "Fix bug/199, enabling support for contenttype with capital letters.",
        "2017-11-21T00:39:08Z",
    )
    git(repo, "checkout", "-q", "-b", "docs-typo")
    commit_files(
        repo,
        {"README.rst": base["README.rst"] + "\nSee the documentation.\n"},
        "Fix a typo",
        "2017-11-22T08:00:00Z",
    )
    merge_pr(repo, "docs-typo", 201, "jdufresne", "Fix a typo", "2017-11-22T09:00:00Z")
    return repo


CHECKER = '''"""Main module: the AST checker."""

import ast

from pyflakes import messages


class Binding(object):
    def __init__(self, name, source):
        self.name = name
        self.source = source
        self.used = False


class Checker(object):
    def __init__(self, tree, filename="(none)"):
        self.messages = []
        self.filename = filename
        self.scope = {}
        self.handleChildren(tree)
        self.report_unused()

    def handleChildren(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.scope[alias.asname or alias.name] = Binding(alias.name, node)
            elif isinstance(node, ast.Name):
                self.handleNodeLoad(node.id)
            elif isinstance(node, ast.AnnAssign):
                self.handleAnnotation(node.annotation, node)

    def handleNodeLoad(self, name):
        if name in self.scope:
            self.scope[name].used = True

    def handleAnnotation(self, annotation, node):
{ANNOTATION}
    def report_unused(self):
        for name, binding in sorted(self.scope.items()):
            if not binding.used:
                self.messages.append(messages.UnusedImport(self.filename, binding.source, name))
'''
ANNOTATION_OLD = "        pass\n"
ANNOTATION_NEW = """        if isinstance(annotation, ast.Str):
            # a string literal annotation ("MyClass") names its imports too
            for inner in ast.walk(ast.parse(annotation.s, mode="eval")):
                if isinstance(inner, ast.Name):
                    self.handleNodeLoad(inner.id)
"""
MESSAGES = '''"""Provide the class Message and its subclasses."""


class Message(object):
    message = ""

    def __init__(self, filename, loc, *args):
        self.filename = filename
        self.lineno = getattr(loc, "lineno", 1)
        self.message_args = args


class UnusedImport(Message):
    message = "%r imported but unused"
'''
HARNESS = """import ast
import unittest

from pyflakes import checker


class TestCase(unittest.TestCase):
    def flakes(self, source, *expected):
        w = checker.Checker(ast.parse(source))
        self.assertEqual(sorted(type(m) for m in w.messages), sorted(expected))
"""
ANNOTATION_TEST = """from pyflakes import messages as m
from pyflakes.test.harness import TestCase


class TestTypeAnnotations(TestCase):
    def test_variable_annotations(self):
        self.flakes("from foo import Bar\\nx: Bar = None\\n")
{EXTRA}"""
ANNOTATION_EXTRA = """
    def test_string_literal_annotation(self):
        self.flakes("from foo import Bar\\nx: 'Bar' = None\\n")

    def test_unused_is_still_reported(self):
        self.flakes("from foo import Bar\\n", m.UnusedImport)
"""


def pyflakes(root: Path) -> Path:
    """PyCQA/pyflakes: issue #290 fixed by PR #313 (merge commit; "Fixes #290" in the branch)."""
    repo = init_repo(root / "PyCQA" / "pyflakes", "PyCQA/pyflakes")
    base = {
        "pyflakes/__init__.py": '__version__ = "1.6.0"\n',
        "pyflakes/checker.py": CHECKER.replace("{ANNOTATION}", ANNOTATION_OLD),
        "pyflakes/messages.py": MESSAGES,
        "pyflakes/test/__init__.py": "",
        "pyflakes/test/harness.py": HARNESS,
        "pyflakes/test/test_type_annotations.py": ANNOTATION_TEST.replace("{EXTRA}", ""),
        "setup.py": "from setuptools import setup\nsetup(name='pyflakes')\n",
    }
    commit_files(repo, base, "Check variable annotations", "2017-08-30T12:00:00Z", "asottile")
    git(repo, "checkout", "-q", "-b", "string-annotations")
    commit_files(
        repo,
        {
            "pyflakes/checker.py": CHECKER.replace("{ANNOTATION}", ANNOTATION_NEW),
            "pyflakes/test/test_type_annotations.py": ANNOTATION_TEST.replace("{EXTRA}", ANNOTATION_EXTRA),
        },
        "Handle string literal annotations\n\nFixes #290",
        "2017-11-21T03:40:00Z",
        "taion",
    )
    merge_pr(
        repo, "string-annotations", 313, "taion", "Handle string literal annotations", "2017-11-25T19:47:22Z"
    )
    return repo


MODELS = '''"""Base classes of github3.py objects."""

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
{RATE}'''
RATE_OLD = """        core = json.get("resources", {}).get("core", {})
        self._remaining = core.get("remaining", 0)
        return self._remaining
"""
RATE_NEW = """        resources = json.get("resources", {})
        # search has its own, lower rate limit (GitHub API v3 docs)
        key = "search" if "/search/" in self._api else "core"
        self._remaining = resources.get(key, {}).get("remaining", 0)
        return self._remaining
"""
SEARCH = '''"""Search results."""

from .models import GitHubCore


class SearchIterator(GitHubCore):
    def __init__(self, count, url, session=None):
        super(SearchIterator, self).__init__({"url": url}, session)
        self.count = count
'''
MODELS_TEST = """from github3.models import GitHubCore


class FakeSession(object):
    def get(self, url):
        return FakeResponse()


class FakeResponse(object):
    status_code = 200

    def json(self):
        return {"resources": {"core": {"remaining": 4999}, "search": {"remaining": 29}}}


def test_core_ratelimit():
    assert GitHubCore({"url": "https://api.github.com/users/x"}, FakeSession()).ratelimit_remaining == 4999
{EXTRA}"""
MODELS_EXTRA = """

def test_search_ratelimit():
    core = GitHubCore({"url": "https://api.github.com/search/issues"}, FakeSession())
    assert core.ratelimit_remaining == 29
"""


def github3(root: Path) -> Path:
    """sigmavirus24/github3.py: issue #775 fixed by PR #776 (squash merge)."""
    repo = init_repo(root / "sigmavirus24" / "github3.py", "sigmavirus24/github3.py")
    base = {
        "src/github3/__init__.py": '__version__ = "1.0.0"\n',
        "src/github3/models.py": MODELS.replace("{RATE}", RATE_OLD),
        "src/github3/search/__init__.py": "from .search import SearchIterator\n",
        "src/github3/search/search.py": SEARCH,
        "tests/unit/test_models.py": MODELS_TEST.replace("{EXTRA}", ""),
        "docs/index.rst": "github3.py\n==========\n",
    }
    commit_files(repo, base, "Start the 1.0 branch", "2018-01-10T12:00:00Z", "sigmavirus24")
    commit_files(
        repo,
        {
            "src/github3/models.py": MODELS.replace("{RATE}", RATE_NEW),
            "tests/unit/test_models.py": MODELS_TEST.replace("{EXTRA}", MODELS_EXTRA),
        },
        "Fix #775: Wrong rate limit returned for `search` (#776)\n\nThis pull request is an attempt to fix issue #775",
        "2018-01-30T14:46:26Z",
        "justfortherec",
    )
    return repo


SAMPLE_REPOS = (toolbelt, pyflakes, github3)
