from pyflakes import messages as m
from pyflakes.test.harness import TestCase


class TestTypeAnnotations(TestCase):
    def test_variable_annotations(self):
        self.flakes("from foo import Bar\nx: Bar = None\n")
