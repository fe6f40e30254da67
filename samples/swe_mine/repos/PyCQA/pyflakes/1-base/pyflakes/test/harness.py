import ast
import unittest

from pyflakes import checker


class TestCase(unittest.TestCase):
    def flakes(self, source, *expected):
        w = checker.Checker(ast.parse(source))
        self.assertEqual(sorted(type(m) for m in w.messages), sorted(expected))
