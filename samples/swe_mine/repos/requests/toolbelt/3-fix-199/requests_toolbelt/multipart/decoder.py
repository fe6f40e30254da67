"""Multipart response decoding."""

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
        if mimetype.split('/')[0].lower() != 'multipart':
            raise NonMultipartContentTypeException("Unexpected mimetype in content-type header: {0}".format(mimetype))
        for item in ct_info[1:]:
            attr, value = item.split("=", 1)
            if attr.lower() == "boundary":
                self.boundary = encode_with(value.strip('"'), self.encoding)

    def _parse_body(self, content):
        self.parts = tuple(p for p in content.split(b"--" + self.boundary) if p.strip(b"-\r\n"))
