"""Provide the class Message and its subclasses."""


class Message(object):
    message = ""

    def __init__(self, filename, loc, *args):
        self.filename = filename
        self.lineno = getattr(loc, "lineno", 1)
        self.message_args = args


class UnusedImport(Message):
    message = "%r imported but unused"
