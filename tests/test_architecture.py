"""Import boundaries (issue 7), pinned with `ast` and checked again in fresh interpreters.

- hooks/*.py: standard library only, nothing of total_recall (they run on every prompt, under
  `python -I -S`, and must work while the package is missing or mid-upgrade);
- storage (db, queue, store, vectors, transcript) never imports the LLM client;
- heavy modules are imported inside the functions that need them, never at module level, so
  the CLI and the hooks start fast.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from total_recall import config

PACKAGE = Path(__import__("total_recall").__file__).resolve().parent
HOOKS = config.resource_dir("hooks")
HEAVY = ("openai", "numpy", "onnxruntime", "tokenizers", "sqlite_vec", "watchfiles", "tenacity", "httpx")
STORAGE = ("db", "queue", "store", "vectors", "transcript")
LLM_CLIENT = ("openai", "total_recall.extract.llm")


# A non-editable install ships the plugin folders inside the package; they are resources (the hooks
# are checked as stdlib shims above), not modules of the layered code.
RESOURCE_DIRS = ("hooks", "skills", "migrations")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in RESOURCE_DIRS)


def imported_names(node: ast.AST, package: str = "total_recall") -> list[tuple[str, int]]:
    """(absolute dotted name, line) of every import under node; relative imports resolved."""
    out = []
    for child in ast.walk(node):
        if isinstance(child, ast.Import):
            out += [(alias.name, child.lineno) for alias in child.names]
        elif isinstance(child, ast.ImportFrom):
            base = child.module or ""
            if child.level:
                base = ".".join([package] + ([base] if base else []))
            out += [(base, child.lineno)] + [(f"{base}.{alias.name}", child.lineno) for alias in child.names]
    return out


def is_type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run at import: the module body, class bodies and the blocks of top-level
    if/try/with (but not `if TYPE_CHECKING:`, which never runs), never function bodies."""
    out = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or is_type_checking(node):
            continue
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.ClassDef)):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [h.body for h in getattr(node, "handlers", [])]
            out += [stmt for block in blocks for stmt in module_level(block)]
        else:
            out.append(node)
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def fresh(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# --- hooks --------------------------------------------------------------------------------------


@pytest.mark.parametrize("hook", sorted(HOOKS.glob("*.py")), ids=lambda p: p.name)
def test_hooks_import_only_the_standard_library(hook):
    names = imported_names(ast.parse(hook.read_text(encoding="utf-8")))
    siblings = {p.stem for p in HOOKS.glob("*.py")}  # a shim may import its hook module, nothing else
    foreign = [
        (n, line)
        for n, line in names
        if top(n) not in sys.stdlib_module_names and top(n) != "__future__" and top(n) not in siblings
    ]
    assert not foreign
    assert not [n for n, _ in names if top(n) == "total_recall"]


def test_the_hook_at_runtime_loads_nothing_but_the_standard_library(tmp_path):
    """Run the shim the way Claude Code does, with input it accepts, and list what got loaded."""
    transcript = tmp_path / "claude" / "projects" / "-p" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("{}\n")
    payload = json.dumps({"session_id": "s", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    code = (
        "import io, json, os, runpy, sys\n"
        "r, w = os.pipe(); os.write(w, sys.argv[2].encode()); os.close(w); os.dup2(r, 0)\n"
        "try:\n    runpy.run_path(sys.argv[1], run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(HOOKS / "enqueue.py"), payload],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "TOTAL_RECALL_HOME": str(tmp_path / "home"),
            "PATH": "/usr/bin:/bin",
            "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        },
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert not {
        m
        for m in loaded
        if m not in sys.stdlib_module_names
        and m not in sys.builtin_module_names
        and not m.startswith("_")
        and m != "enqueue_hook"  # the shim's own module, next to it
    }
    assert (tmp_path / "home" / "spool.jsonl").exists()  # it did its work (no database yet: the spool)


# --- storage never reaches for the LLM ----------------------------------------------------------------


@pytest.mark.parametrize("name", STORAGE)
def test_storage_modules_never_import_the_llm_client(name):
    """Anywhere in the file, including inside functions."""
    names = imported_names(ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8")))
    assert not [
        (n, line)
        for n, line in names
        if n in LLM_CLIENT or top(n) == "openai" or n.startswith("total_recall.extract.llm")
    ]


def test_storage_modules_load_no_llm_client_at_runtime():
    code = (
        "import json, sys\n"
        + "".join(f"import total_recall.{m}\n" for m in STORAGE)
        + f"print(json.dumps(sorted(m for m in sys.modules if m in {list(LLM_CLIENT)!r})))"
    )
    assert fresh(code) == []


# --- heavy modules only inside functions ------------------------------------------------------------


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_heavy_import_at_module_level(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    heavy = [
        (n, line) for stmt in module_level(tree.body) for n, line in imported_names(stmt) if top(n) in HEAVY
    ]
    assert not heavy, f"import inside the function that needs it: {heavy}"


def test_the_checker_sees_what_it_must():
    """The rule above would catch a heavy import hidden in a top-level try, and allow the rest."""
    source = (
        "import os\n"
        "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n"
        "if TYPE_CHECKING:\n    import openai\n"
        "def f():\n    import onnxruntime\n"
        "class C:\n    from sqlite_vec import load\n"
    )
    found = {n for stmt in module_level(ast.parse(source).body) for n, _ in imported_names(stmt)}
    assert found == {"os", "numpy", "sqlite_vec", "sqlite_vec.load"}


HEAVY_LOADED = f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {list(HEAVY)!r})))"


def test_importing_the_cli_loads_no_heavy_module():
    assert fresh(f"import json, sys\nimport total_recall.cli\n{HEAVY_LOADED}") == []


def test_cli_help_loads_no_heavy_module():
    code = (
        "import contextlib, io, json, sys\nimport total_recall.cli as cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    for argv in (['--help'], ['search', '--help'], ['daemon', '--help']):\n"
        "        try:\n            cli.main(argv)\n        except SystemExit:\n            pass\n"
        f"{HEAVY_LOADED}"
    )
    assert fresh(code) == []


# --- layers: who may import whom (issue 11) ---------------------------------------------------------
# Lowest first. A module may import only from its own layer or a lower one, anywhere in the file
# (function-level imports included: a lazy import is still a dependency), and the module graph
# has no cycle. Every module of the package must be listed, so a new one takes a place on purpose.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundation",
        {
            "__init__",
            "errors",
            "log",
            "retry",
            "config",
            "locations",
            "projects",
            "redact",
            "query",
            "render",
            "transcript",
            "install",
            "client",
            "assets",
            "extract",
        },
    ),
    ("models", {"extract.protocol", "extract.offline", "extract.llm", "extract.summary", "embed"}),
    ("storage", {"db", "queue", "trust", "state", "pg", "transactions", "vector_cache"}),
    ("storage owners", {"store", "vectors", "memories", "erasure", "salvage", "lookup"}),
    ("engine", {"indexer", "search", "repoint"}),
    ("memory", {"digest", "curate", "maintain", "note", "exchange"}),
    ("runtime", {"daemon", "server"}),
    ("commands", {"backfill", "report", "recover", "browse", "bootstrap", "service", "mcp_server"}),
    ("web view", {"ui", "ui.views", "ui.app"}),
    ("entry points", {"cli", "__main__"}),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def package_imports(path: Path, known: set[str]) -> set[str]:
    """The package modules a file imports anywhere in it ("from total_recall import db" is db)."""
    out = set()
    for name, _ in imported_names(ast.parse(path.read_text(encoding="utf-8"))):
        if top(name) != "total_recall" or name == "total_recall":
            continue
        dotted = name[len("total_recall.") :]
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]  # an attribute (db.connect) or a name (errors.X)
        if dotted:
            out.add(dotted)
    return out


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in modules()}
    return {name: package_imports(path, set(files)) - {name} for name, path in files.items()}


def layer_of(table: list[tuple[str, set[str]]]) -> dict[str, tuple[int, str]]:
    return {m: (i, name) for i, (name, members) in enumerate(table) for m in members}


def upward_imports(graph: dict[str, set[str]], table: list[tuple[str, set[str]]]) -> list[str]:
    """'m (its layer) imports d (a higher layer)' for every import that points up."""
    layers = layer_of(table)
    return sorted(
        f"{m} ({layers[m][1]}) imports {d} ({layers[d][1]})"
        for m, deps in graph.items()
        for d in deps
        if layers[d][0] > layers[m][0]
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer():
    listed = [m for _, members in LAYERS for m in members]
    assert len(listed) == len(set(listed)), "a module is in two layers"
    assert set(import_graph()) == set(listed)


def test_no_module_imports_upward():
    upward = upward_imports(import_graph(), LAYERS)
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_the_module_graph_has_no_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_layer_checks_see_what_they_must():
    """A made-up upward import and a made-up cycle are both caught."""
    table = [("low", {"db"}), ("high", {"search", "cli"})]
    assert upward_imports({"db": {"search"}, "search": {"db"}, "cli": {"search"}}, table) == [
        "db (low) imports search (high)"
    ]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# --- where SQL lives (issue 11) ----------------------------------------------------------------------
# SQL text is written only in the modules that own storage (DESIGN.md "Where SQL lives"); every
# other module calls their named functions. The stdlib hooks (outside the package) are the one
# documented exception: they cannot import the package.
SQL_OWNERS = {
    "db",
    "queue",
    "trust",
    "state",
    "store",
    "vectors",
    "memories",
    "erasure",
    "salvage",
    "lookup",
    "pg",
    "transactions",
    "vector_cache",
}
# A statement start: the keyword and what must follow it in SQL, so prose ("Create the home
# folder", "Drop a name ...", "replace") is not taken for a query.
SQL_START = re.compile(
    r"\s*(SELECT\s+(.*(\bFROM\b|\w\()|[\d?'])|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+(OR\s+\w+\s+)?\S+\s+SET\s"
    r"|DELETE\s+FROM\s|CREATE\s+(TEMP\w*\s+|UNIQUE\s+|VIRTUAL\s+)*(TABLE|INDEX|TRIGGER|VIEW)\s"
    r"|DROP\s+(TABLE|INDEX|TRIGGER|VIEW)\s|PRAGMA\s+\w+|WITH\s+(RECURSIVE\s+)?\w+(\s*\([\w, ]*\))?\s+AS\s*\("
    r"|BEGIN(\s+(IMMEDIATE|DEFERRED|EXCLUSIVE|TRANSACTION))?\s*;?\s*$|REPLACE\s+INTO\s|ALTER\s+TABLE\s)",
    re.IGNORECASE | re.DOTALL,
)


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (prose that may begin "Create ..." or "Drop ...")."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def sql_strings(source: str) -> list[tuple[int, str]]:
    """(line, start) of every string constant (f-strings by their leading text) that begins like
    an SQL statement."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # the text with every {placeholder} as "x"
            skip |= {id(v) for v in node.values}
            text = "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        else:
            continue
        if SQL_START.match(text):
            found.append((node.lineno, " ".join(text.split())[:60]))
    return sorted(found)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_sql_is_written_only_in_the_storage_modules(path):
    if module_name(path) in SQL_OWNERS:
        return
    found = sql_strings(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{module_name(path)} holds SQL; move it into a storage module "
        f"({', '.join(sorted(SQL_OWNERS))}):\n" + "\n".join(f"  line {n}: {t}" for n, t in found)
    )


def test_the_sql_check_sees_what_it_must():
    source = (
        '"""Create the home folder."""\n'
        'x = "replace"\n'
        'y = "Drop a name the speaker addresses"\n'
        'a = db.one("SELECT id FROM ideas WHERE id = ?", (1,))\n'
        'b = f"UPDATE {table} SET x = 1"\n'
        'c = "  with recent(id) AS (SELECT 1) SELECT id FROM recent"\n'
        'd = "PRAGMA quick_check"\n'
        'e = "Select the best of them, then delete it"\n'
        'f = "BEGIN IMMEDIATE"\n'
        'g = "begin the work"\n'
        'h = "SELECT 1"\n'
    )
    assert [n for n, _ in sql_strings(source)] == [4, 5, 6, 7, 9, 11]


def test_every_sql_owner_is_a_module():
    assert SQL_OWNERS <= set(import_graph())
