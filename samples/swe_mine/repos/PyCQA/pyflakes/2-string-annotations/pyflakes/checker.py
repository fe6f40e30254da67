"""Main module: the AST checker."""

import ast

from pyflakes import messages


class Binding(object):
    def __init__(self, name, source):
        self.name = name
        self.source = source
        self.used = False


class Checker(object):
    def __init__(self, tree, filename="(none)"):
        self.messages = []
        self.filename = filename
        self.scope = {}
        self.handleChildren(tree)
        self.report_unused()

    def handleChildren(self, tree):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.scope[alias.asname or alias.name] = Binding(alias.name, node)
            elif isinstance(node, ast.Name):
                self.handleNodeLoad(node.id)
            elif isinstance(node, ast.AnnAssign):
                self.handleAnnotation(node.annotation, node)

    def handleNodeLoad(self, name):
        if name in self.scope:
            self.scope[name].used = True

    def handleAnnotation(self, annotation, node):
        if isinstance(annotation, ast.Str):
            # a string literal annotation ("MyClass") names its imports too
            for inner in ast.walk(ast.parse(annotation.s, mode="eval")):
                if isinstance(inner, ast.Name):
                    self.handleNodeLoad(inner.id)

    def report_unused(self):
        for name, binding in sorted(self.scope.items()):
            if not binding.used:
                self.messages.append(messages.UnusedImport(self.filename, binding.source, name))
