from pyflakes import messages as m
from pyflakes.test.harness import TestCase


class TestTypeAnnotations(TestCase):
    def test_variable_annotations(self):
        self.flakes("from foo import Bar\nx: Bar = None\n")

    def test_string_literal_annotation(self):
        self.flakes("from foo import Bar\nx: 'Bar' = None\n")

    def test_unused_is_still_reported(self):
        self.flakes("from foo import Bar\n", m.UnusedImport)
