"""The run folder's and the cache's file names are spelled in one place each: rundir.py and
data/cachedir.py. Anywhere else in the package a path of either is made through RunDir or CacheDir,
so a name changed there changes everywhere. The names are read from the two classes."""
import ast
import re
from pathlib import Path

from myxtts.data.cachedir import CacheDir
from myxtts.rundir import RunDir

PACKAGE = Path(__file__).resolve().parents[1] / "myxtts"
OWNERS = {PACKAGE / "rundir.py", PACKAGE / "data" / "cachedir.py"}


def _names(cls) -> set[str]:
    return {v for k, v in vars(cls).items() if k.isupper() and isinstance(v, str)}


NAMES = _names(RunDir) | _names(CacheDir)
FILES = {n for n in NAMES if "." in n}  # config.yaml, meta.json, ...: wrong in any string
FOLDERS = NAMES - FILES  # samples, shards, ...: also plain words, so wrong only as a path part


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def hand_spelled(source: str) -> list[tuple[int, str]]:
    """(line, name) of each layout name written by hand: in a string that is no docstring (an
    f-string's text included), a file name anywhere, a folder name as a part of a path
    (``x / "samples"``, ``"samples/..."``)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                if isinstance(side, ast.Constant) and side.value in FOLDERS:
                    out.append((side.lineno, side.value))
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        for name in FILES:
            if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", node.value):
                out.append((node.lineno, name))
        for name in FOLDERS:
            if re.search(rf"(?<![\w.])({re.escape(name)}/(?!s\b)|/{re.escape(name)}(?![\w]))", node.value):
                out.append((node.lineno, name))
    return out


def test_the_check_finds_a_name_spelled_by_hand():
    assert hand_spelled('p = run / "metrics.jsonl"\n') == [(1, RunDir.METRICS)]
    assert hand_spelled('p = run / "samples"\n') == [(1, RunDir.SAMPLES)]
    assert hand_spelled('s = f"{run} has no meta.json"\n') == [(1, CacheDir.META)]
    assert hand_spelled('s = "see shards/00001"\n') == [(1, CacheDir.SHARDS)]
    assert hand_spelled('"""a docstring may name summary.json"""\n') == []
    assert hand_spelled('s = "GPU samples taken while compiling"\n') == []  # words, not paths
    assert hand_spelled('s = f"{rate} samples/s"\n') == []  # a rate


def test_no_run_or_cache_file_name_is_spelled_outside_its_module():
    assert {"metrics.jsonl", "model.safetensors", "tensorboard", "meta.json", "shards"} <= NAMES
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
             for path in sorted(PACKAGE.rglob("*.py")) if path not in OWNERS
             for line, name in hand_spelled(path.read_text(encoding="utf-8"))]
    assert found == []
