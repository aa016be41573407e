"""Rows stay in the store (issue 23): jobq.store.records is the one place that reads a row's
columns; core gets the domain's Job and Lease or the store's typed records, and never
indexes a row by column name. A column renamed in queries.sql then breaks one converter in
records.py, found by its tests, not a read somewhere in core found by a request.

Read from the source: no subscript of anything by a string (``x["status"]``), no ``.get`` of
a string key, no ``_mapping``, and no use of the store's ``Row`` type, except on the few
mappings core builds or receives from the API, each named below with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

import jobq.core

CORE = Path(jobq.core.__file__).parent

# Mappings that are not rows: name -> why core reads it by key.
NOT_ROWS = {
    "changes": "a PATCH body's fields, as the API hands them to core",
    "fields": "the job template core builds from a schedule and a PATCH",
    "environ": "os.environ",
}


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _column_reads(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, (ast.Constant, ast.JoinedStr)):
            key = node.slice
            if isinstance(key, ast.JoinedStr) or isinstance(key.value, str):
                if _name(node.value) not in NOT_ROWS:
                    found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            if _name(node.func.value) not in NOT_ROWS:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and node.attr == "_mapping":
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Name) and node.id == "Row":
            found.append((node.lineno, "the store's Row type"))
        elif isinstance(node, ast.alias) and node.name == "Row":
            found.append((getattr(node, "lineno", 0), "import of the store's Row type"))
    return found


def test_core_reads_no_column_of_a_row() -> None:
    reads = [f"{path.relative_to(CORE.parent)}:{line}: {text}"
             for path in sorted(CORE.glob("*.py"))
             for line, text in _column_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert not reads, "core reads rows by column name; read them in jobq.store.records:\n" + "\n".join(reads)


def test_the_check_finds_what_it_looks_for() -> None:
    source = '''
from jobq.store.db import Row
def f(row, rows):
    a = row["status"]
    b = row.get("queue")
    c = rows[0]._mapping
    d = {r[f"job_{k}"] for r in rows for k in "ab"}
    e = changes["cron"], fields["type"], os.environ.get("X")  # not rows
'''
    lines = sorted({line for line, _ in _column_reads(ast.parse(source))})
    assert lines == [2, 4, 5, 6, 7]
