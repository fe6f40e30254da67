"""trafilatura's labelled test pages: labels read from its test file as the tests assert them."""

from samples.extraction_eval import Segment, parse_labels

SOURCE = '''
MOCK_PAGES = {
'https://a.example/': 'a.html',
'https://b.example/': 'b.html',
'https://gone.example/': 'gone.html',
}

def test_extract(xmloutput):
    result = load_mock_page('https://a.example/', xmloutput)
    assert 'main text' in result and 'Impressum' not in result # and 'missed text' in result
    if xmloutput is False:
        assert 'only in txt' in result and 'a stray string' and 'Teilen' not in result

    #result = load_mock_page('https://gone.example/', xmloutput)
    #assert 'dropped page' in result

    result = load_mock_page('https://b.example/', xmloutput)
    assert 'Caf\\u00e9 cr\\u00e8me' in result
    ## comments!
    # and 'Comment by' not in result
'''


def test_labels_are_the_tests_assertions_in_order_with_commented_ones_marked():
    pages = {p.url: p for p in parse_labels(SOURCE)}
    assert pages["https://a.example/"].file == "a.html"
    assert pages["https://a.example/"].segments == [
        Segment("main text", True), Segment("Impressum", False), Segment("missed text", True, commented=True),
        Segment("only in txt", True), Segment("Teilen", False)]  # the bare string labels nothing
    # a page whose test is commented out keeps its labels, marked
    assert pages["https://gone.example/"].segments == [Segment("dropped page", True, commented=True)]
    assert pages["https://b.example/"].segments == [Segment("Café crème", True), Segment("Comment by", False, True)]


def test_the_real_labelled_set(extraction_eval):
    folder, pages = extraction_eval
    segments = [s for p in pages for s in p.segments]
    assert len(pages) == 84 and all((folder / p.file).is_file() for p in pages)
    assert (sum(s.expected and not s.commented for s in segments),
            sum(not s.expected and not s.commented for s in segments)) == (198, 193)
    assert sum(s.commented for s in segments) == 44
