"""The library stays readable: no module over 600 lines, no function over 80 lines of code
(its docstring, blank lines and comment lines not counted)."""

import ast

import pytest

PACKAGES = ("polydom", "index", "lattice", "greedy", "featurizers")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def library_modules(root):
    for package in PACKAGES:
        yield from sorted((root / package).rglob("*.py"))


def code_lines(node, lines) -> int:
    """Lines of ``node`` that hold code: its docstring, blank lines and comments left out."""
    span = set(range(node.lineno, node.end_lineno + 1))
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        span -= set(range(first.lineno, first.end_lineno + 1))
    return sum(1 for n in span if lines[n - 1].strip() and not lines[n - 1].strip().startswith("#"))


def test_no_module_is_longer_than_600_lines(repo_root):
    long = {str(p.relative_to(repo_root)): n for p in library_modules(repo_root)
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_no_function_is_longer_than_80_lines_of_code(repo_root):
    long = {}
    for path in library_modules(repo_root):
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = code_lines(node, lines)
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(repo_root)}:{node.lineno} {node.name}"] = n
    assert not long, long


@pytest.mark.parametrize("text, expected", [
    ('def f():\n    """Doc\n    string."""\n    # a comment\n\n    return 1\n', 2),
    ("def f():\n    x = 1\n    return x\n", 3),
])
def test_the_count_leaves_out_docstrings_blank_lines_and_comments(text, expected):
    node = ast.parse(text).body[0]
    assert code_lines(node, text.splitlines()) == expected
