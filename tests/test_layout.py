"""The house rules a newcomer relies on (DESIGN.md "Layout" and "House style"), checked on the tree.
(Samples and tests staying out of the product: tests/test_samples_boundary.py.)"""

from pathlib import Path

from tests.support.import_graph import MAX_LINES, ROOT, build

GRAPH = build()


def test_no_product_module_is_over_the_size_limit():
    assert GRAPH.too_long() == [], f"modules over {MAX_LINES} lines"


def test_no_import_circles_even_counting_imports_inside_functions():
    assert GRAPH.circles() == []
    assert GRAPH.circles(deferred=True) == []


def test_data_flows_one_way():
    assert GRAPH.upward == []


def test_exactly_one_module_uses_datasketchs_minhash():
    assert sorted(GRAPH.datasketch_minhash) == ["filters.minhash"]


def test_the_readme_is_short_and_every_wing_has_its_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    linked = {line.split("(docs/")[1].split(")")[0].split("#")[0]
              for line in readme.splitlines() if "(docs/" in line}
    assert linked, "the README links no docs page"
    for page in linked:
        assert (ROOT / "docs" / page).is_file(), page


def test_the_graph_reader_sees_the_whole_product():
    # a reader that silently skipped a package would make every check above vacuous
    tops = {m.split(".")[0] for m in GRAPH.modules}
    assert tops == {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                    and p.name not in ("tests", "samples", "benchmarks")}
    assert len(GRAPH.modules) > 200 and Path(GRAPH.modules["core"]).name == "__init__.py"
