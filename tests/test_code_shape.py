"""The package keeps the shape its rules give it: no module over 400 lines, no function over 60
lines, no call with more than 8 positional arguments. Read from the source with ast, so a long
function or call written anywhere in myxtts/ fails here, named by file, line and size."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "myxtts"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_POSITIONAL_ARGS = 8

ALLOWED: set[tuple[str, str]] = set()  # (module, what) allowed over its limit, with its reason: none


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ast.unparse(f))


def oversized(source: str, name: str) -> list[tuple[str, str, int, int]]:
    """(module, what, line, size) of each thing in ``source`` over its limit."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append((name, "module", 1, lines))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            size = node.end_lineno - node.lineno + 1
            if size > MAX_FUNCTION_LINES:
                found.append((name, f"function {node.name}", node.lineno, size))
        elif isinstance(node, ast.Call) and len(node.args) > MAX_POSITIONAL_ARGS:
            found.append((name, f"call {_called(node)}", node.lineno, len(node.args)))
    return found


def test_the_checker_finds_each_kind_of_oversize():
    long_function = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    long_call = "g(" + ", ".join("1" * (MAX_POSITIONAL_ARGS + 1)) + ")\n"
    ok_call = "g(" + ", ".join("1" * MAX_POSITIONAL_ARGS) + ", a=1, b=2)\n"
    assert oversized(long_function, "m.py") == [("m.py", "function f", 1, MAX_FUNCTION_LINES + 1)]
    assert oversized(long_call, "m.py") == [("m.py", "call g", 1, MAX_POSITIONAL_ARGS + 1)]
    assert oversized(ok_call + "def f():\n    pass\n", "m.py") == []
    assert oversized("x = 1\n" * (MAX_MODULE_LINES + 1), "m.py") == [("m.py", "module", 1, 401)]


def test_no_module_function_or_call_over_its_limit():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += oversized(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix())
    over = [f for f in found if f[:2] not in ALLOWED]
    assert not over, "\n".join(f"myxtts/{m}:{line} {what}: {size}" for m, what, line, size in over)
    stale = ALLOWED - {f[:2] for f in found}
    assert not stale, f"within limits now, drop from ALLOWED: {sorted(stale)}"


def test_no_import_cycles():
    """The package's modules import each other one way (the shared import-cycle reader, where the
    checkout has the project's shared tools beside it)."""
    tool = PACKAGE.parent.parent / "shared" / "tools" / "import_cycles.py"
    if not tool.is_file():
        pytest.skip(f"{tool} is not beside this checkout")
    done = subprocess.run([sys.executable, str(tool), str(PACKAGE)], capture_output=True, text=True)
    assert done.returncode == 0 and "0 module cycles, 0 package cycles" in done.stdout, done.stdout
