import json

from pipelines.inputs import list_input_files, sample_inputs


def test_sample_corpus_is_real_and_complete(sample_corpus):
    files = list_input_files(sample_inputs(sample_corpus))
    html = [f for f in files if f.format == "html"]
    assert len(html) >= 500
    assert any(f.relpath == "tutorial/classes.html" for f in html)
    books = [json.loads(line) for line in sample_corpus.books_jsonl.read_text().splitlines()]
    titles = {b["title"] for b in books}
    assert len(books) == 10
    assert {"Emma", "Persuasion", "The War of the Worlds", "Great Expectations"} <= titles
    emma = next(b for b in books if b["title"] == "Emma")
    assert "Emma Woodhouse, handsome, clever, and rich" in emma["text"]
    assert all(len(b["text"]) > 200_000 for b in books)
    assert len({b["id"] for b in books}) == 10


def test_missing_package_message_says_how_to_provide(tmp_path, monkeypatch):
    """apt-get is replaced by a failing command (the real one needs a mirror): the error must
    name the package and how to supply it."""
    import pytest

    from samples import corpus as sc

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text("#!/bin/sh\necho 'E: Unable to locate package' >&2\nexit 100\n")
    (fake / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    with pytest.raises(sc.SampleError) as err:
        sc.fetch_package("python3.11-doc", tmp_path / "data", log=lambda m: None)
    msg = str(err.value)
    assert "python3.11-doc" in msg and "apt-get download python3.11-doc" in msg and "data/debs/" in msg
    assert "Unable to locate package" in msg
