from requests_toolbelt.multipart.decoder import MultipartDecoder, NonMultipartContentTypeException


def test_boundary_is_found():
    d = MultipartDecoder(b"--abc\r\nx\r\n--abc--", "multipart/related; boundary=abc")
    assert d.boundary == b"abc"


def test_rejects_non_multipart():
    try:
        MultipartDecoder(b"", "text/plain")
    except NonMultipartContentTypeException:
        return
    raise AssertionError("text/plain accepted")
