"""The architecture holds: imports point inward, git and typer stay behind their modules,
every command teaches with --help and is documented in the README."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from majordomus import cli
from tests.support.repo import Repo

PACKAGE = Path(__file__).resolve().parent.parent / "majordomus"
README = Path(__file__).resolve().parent.parent / "README.md"

# Which of its own modules each module may import: __main__ -> cli, front, hooks -> the verb
# modules (write, read, freshness, diagnosis, sharing, adopt, agentsetup; context) -> tasks
# -> index, writer, remote, store/graph/... -> errors; invocation (what a command runs
# with) low enough for all of them.
# The store layer (location, gitfiles, notestree, blobs, notesread, notesref, merge, behind
# `store`) is the only one that touches the repository: through libgit2, or its files.
ALLOWED = {
    "__init__": set(),
    "tuples": set(),
    "__main__": {"cli", "errors", "front", "hooks", "interrupt", "invocation", "plaintext"},
    "adopt": {
        "adopttext",
        "errors",
        "index",
        "invocation",
        "patches",
        "records",
        "tasks",
        "values",
        "views",
        "writer",
    },
    "adopttext": {"jsontext", "plaintext", "render", "values"},
    "agentfindings": {"agents", "errors", "values"},
    "agents": {"errors", "repository", "values"},
    "agentsetup": {"agents", "errors", "invocation", "reports", "repository", "tasks", "values"},
    "blobs": {"gitobjects", "notes", "notetoml"},
    "cachefile": {"records"},
    "cliparts": {"invocation"},
    "chains": set(),
    "cli": {
        "adopt",
        "cliparts",
        "completion",
        "errors",
        "hooks",
        "interrupt",
        "invocation",
        "mcpfront",
        "plaintext",
        "profile",
        "readcli",
        "setupcli",
        "values",
        "write",
    },
    "completion": {"agents", "errors", "index", "views", "invocation", "plaintext", "tasks"},
    "clonesetup": {"errors", "remote", "repository", "values"},
    "commitnotes": {"blobs", "gitobjects", "notestree", "notetoml", "readrefs", "repository"},
    "context": {
        "errors",
        "index",
        "invocation",
        "jsontext",
        "plaintext",
        "profile",
        "records",
        "tasks",
        "values",
    },
    "diagnosis": {
        "agentfindings",
        "errors",
        "index",
        "invocation",
        "plaintext",
        "profile",
        "remote",
        "reports",
        "signconfig",
        "tasks",
        "values",
        "writer",
    },
    "divergence": {"chains", "records", "tally"},
    "documentcache": {"cachefile", "jsontext", "noteforms", "notes", "records"},
    "errors": set(),
    "fieldtext": {"errors", "records"},
    "freshness": {
        "errors",
        "index",
        "interrupt",
        "invocation",
        "profile",
        "render",
        "tasks",
        "values",
    },
    "front": {"context", "freshness", "invocation", "read", "search", "sharing", "write"},
    "drawing": {"errors", "partialclone", "repository", "values"},
    "gitfiles": set(),
    "gitobjects": set(),
    "helperparse": {
        "blobs",
        "cachefile",
        "documentcache",
        "noteforms",
        "notes",
        "readcache",
        "searchcache",
        "sharedread",
        "summaries",
    },
    "gitprocess": {"errors", "profile"},
    "graph": {"chains", "divergence", "records", "tally"},
    "graphtext": {"plaintext", "values"},
    "greptext": {"jsontext", "plaintext", "records", "render", "values"},
    "history": {
        "cachefile",
        "errors",
        "gitfiles",
        "gitobjects",
        "graph",
        "repository",
    },
    "hooks": {"agents", "context", "errors", "invocation", "plaintext", "tasks", "values"},
    "index": {"blobs", "graph", "notes", "records", "values", "viewparts"},
    "interrupt": set(),
    "invocation": {"errors", "plaintext", "records", "values"},
    "jsontext": {"records"},
    "listings": {"blobs", "notes", "summaries", "values"},
    "matching": {"errors", "searchcache", "values"},
    "location": {"errors", "gitfiles", "repository"},
    "markdowntext": {"jsontext", "plaintext", "records", "values"},
    "mcp_server": {"jsontext", "mcptable"},
    "mcpfront": {"mcp_server", "mcptable"},
    "mcptable": set(),
    "fastforward": {"blobs", "gitobjects", "notes", "notestree", "notetoml"},
    "merge": {"blobs", "fastforward", "notes", "notestree", "notetoml"},
    "noteforms": set(),
    "notes": {"notetoml", "records"},
    "notesread": {
        "blobs",
        "cachefile",
        "documentcache",
        "errors",
        "gitobjects",
        "helperparse",
        "listings",
        "notes",
        "notestree",
        "notetoml",
        "objectids",
        "partialclone",
        "readcache",
        "readrefs",
        "repository",
        "searchcache",
        "summaries",
        "values",
    },
    "notesref": {"errors", "interrupt", "notestree", "notetoml", "repository", "values"},
    "notestree": {"notetoml"},
    "notetoml": set(),
    "objectids": set(),
    "partialclone": {"errors", "repository"},
    "patches": {"cachefile", "errors", "history"},
    "plaintext": {"records"},
    "profile": {"errors", "records"},
    "read": {
        "commitnotes",
        "drawing",
        "errors",
        "graphtext",
        "index",
        "views",
        "invocation",
        "markdowntext",
        "notes",
        "render",
        "tasks",
        "values",
    },
    "readcache": {"cachefile", "records"},
    "readrefs": {"errors", "gitfiles", "repository"},
    "records": set(),
    "remote": {"errors", "gitprocess", "repository"},
    "render": {"jsontext", "plaintext", "records", "values"},
    "reports": {"jsontext", "plaintext", "profile", "values"},
    "repository": {"errors", "gitfiles", "gitobjects", "records"},
    "search": {
        "cachefile",
        "documentcache",
        "errors",
        "greptext",
        "index",
        "views",
        "invocation",
        "jsontext",
        "matching",
        "notes",
        "records",
        "searchcache",
        "tasks",
        "values",
    },
    "readcli": {"cliparts", "freshness", "invocation", "read", "search"},
    "searchcache": {"cachefile", "jsontext", "notes", "records"},
    "secret": set(),
    "setupcli": {
        "agentsetup",
        "cliparts",
        "completion",
        "context",
        "diagnosis",
        "invocation",
        "sharing",
        "values",
    },
    "sharedread": {"objectids"},
    "sharing": {
        "clonesetup",
        "errors",
        "invocation",
        "remote",
        "reports",
        "repository",
        "tasks",
        "values",
        "writer",
    },
    "signconfig": {"repository"},
    "signing": {"errors", "notes", "plaintext", "records", "signconfig"},
    "summaries": {"notes", "notetoml", "objectids", "records", "values"},
    "tally": set(),
    "tasks": {
        "cachefile",
        "errors",
        "history",
        "index",
        "views",
        "invocation",
        "location",
        "notesread",
        "profile",
        "records",
        "remote",
        "repository",
        "values",
        "verifying",
        "viewparts",
    },
    "values": {"records"},
    "verifying": {"cachefile", "notes", "records", "repository", "signconfig", "values"},
    "views": {
        "cachefile",
        "commitnotes",
        "errors",
        "index",
        "notes",
        "readrefs",
        "records",
        "repository",
        "values",
        "viewparts",
    },
    "viewparts": {"cachefile", "notes", "records", "repository", "values"},
    "write": {
        "errors",
        "fieldtext",
        "index",
        "invocation",
        "patches",
        "plaintext",
        "records",
        "render",
        "secret",
        "signconfig",
        "signing",
        "tasks",
        "values",
        "views",
        "writer",
    },
    "writer": {
        "blobs",
        "errors",
        "fastforward",
        "history",
        "interrupt",
        "merge",
        "notes",
        "notesread",
        "notesref",
        "notestree",
        "notetoml",
        "records",
        "repository",
        "values",
    },
}
STORE_LAYER = {
    "repository", "location", "gitfiles", "gitobjects", "history", "drawing", "notestree", "blobs",
    "readrefs", "commitnotes", "partialclone", "notesread", "helperparse", "notesref", "merge",
    "writer", "fastforward",
}  # fmt: skip
# Third-party and process-level imports that belong to one module (or layer) only.
OWNERS = {
    "pygit2": STORE_LAYER,
    "typer": {
        "cli",
        "cliparts",
        "readcli",
        "setupcli",
        "completion",
    },  # completion: click's, as typer vendors it
    "click": set(),
    "subprocess": {
        "repository",
        "history",
        "drawing",
        "location",
        "gitfiles",
        "gitobjects",
        "gitprocess",
        "remote",
        "sharing",
        "patches",
        "signconfig",
    },
    "mcp": {"mcp_server"},
    "pydantic": {"mcp_server"},  # it comes with the SDK: the tools' parameter descriptions
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            module = node.module or ""
            names.add(module)
            if module == "majordomus":
                names.update(f"majordomus.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.stem)
def test_imports_point_inward(path: Path) -> None:
    assert path.stem in ALLOWED, f"new module {path.name}: add it to ALLOWED with its layer"
    names = imports_of(path)
    own = {n.split(".")[1] for n in names if n.startswith("majordomus.")}
    if "__version__" in own:
        own = (own - {"__version__"}) | {"__init__"}
    # Any module may import the package's version and its NamedTuple (`tuples`).
    assert own <= ALLOWED[path.stem] | {"__init__", "tuples"}, f"{path.name} imports {own}"
    for library, owners in OWNERS.items():
        if any(n == library or n.startswith(library + ".") for n in names):
            assert path.stem in owners, f"{path.name} imports {library}"


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.stem)
def test_every_module_says_what_it_owns(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path.name} has no module docstring"
    assert "from __future__ import annotations" in path.read_text() or path.stem == "__init__"


def command_paths() -> list[list[str]]:
    group = typer.main.get_command(cli.app)
    paths: list[list[str]] = []
    for name, command in getattr(group, "commands", {}).items():
        sub = getattr(command, "commands", None)
        if sub:
            paths.extend([name, child] for child in sub)
        else:
            paths.append([name])
    return paths


def test_all_commands_of_the_spec_exist() -> None:
    names = {" ".join(p) for p in command_paths()}
    expected = {
        "task new", "task list", "task use", "checkpoint", "handover", "resume",
        "history", "show", "check", "watch", "doctor", "profile",
        "context", "hook", "agent install", "mcp", "adopt",
    }  # fmt: skip
    assert expected <= names


@pytest.mark.parametrize("argv", command_paths(), ids=" ".join)
def test_every_command_has_help_and_is_documented(repo: Repo, argv: list[str]) -> None:
    result = repo.run(*argv, "--help")
    assert result.code == 0
    assert result.out.startswith(f"Usage: majordomus {' '.join(argv)} [OPTIONS]")
    summary = result.out.split("\n\n")[1].strip()
    assert len(summary) > 20, f"{argv}: help text is too thin: {summary!r}"
    pattern = r"majordomus(?: -C \S+)? " + re.escape(" ".join(argv)) + r"\b"
    assert re.search(pattern, README.read_text()), (
        f"README does not document `majordomus {' '.join(argv)}`"
    )


@pytest.mark.parametrize(
    "module",
    [
        "majordomus.markdowntext",
        "majordomus.plaintext",
        "majordomus.render",
        "majordomus.reports",
        "majordomus.values",
        "majordomus.agents",
        "majordomus.hooks",
    ],
)
def test_values_the_renderer_and_the_hook_tables_import_without_git(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('pygit2')))"
    command = [sys.executable, "-c", code]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "[]\n", "")


def floors() -> dict[str, int]:
    """Each module's floor: one above the highest module it imports (at the top, in a
    function or for types only alike), 1 for a module that imports none of ours."""
    imported = {}
    for path in PACKAGE.glob("*.py"):
        names = imports_of(path)
        own = {n.split(".")[1] for n in names if n.startswith("majordomus.")}
        imported[path.stem] = own & {p.stem for p in PACKAGE.glob("*.py")} - {path.stem}
    found: dict[str, int] = {}

    def floor(module: str, path: tuple[str, ...]) -> int:
        assert module not in path, f"an import circle: {' -> '.join((*path, module))}"
        if module not in found:
            below = [floor(m, (*path, module)) for m in imported[module]]
            found[module] = 1 + max(below, default=0)
        return found[module]

    for module in imported:
        floor(module, ())
    return found


def test_ten_floors_at_most_and_the_map_says_which() -> None:
    """No import circle; at most ten floors; docs/architecture.md's table puts each module
    on the floor its imports make it."""
    found = floors()
    assert max(found.values()) <= 10, sorted(found.items(), key=lambda kv: -kv[1])[:6]
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    mapped: dict[str, int] = {}
    for line in doc.splitlines():
        row = re.fullmatch(r"\| (\d+) \| (.*) \|", line)
        if row:
            mapped.update((name, int(row[1])) for name in re.findall(r"`([a-z_]+)`", row[2]))
    named = {m: f for m, f in found.items() if m != "__init__"}
    assert mapped == named, {m: (mapped.get(m), f) for m, f in named.items() if mapped.get(m) != f}
