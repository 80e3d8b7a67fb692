"""Test support for compiler work: a pip-free FileCheck for golden ``.mlir`` files."""
