"""Commits drawn as `git log --graph` draws them, git itself asked to draw: in a throwaway
git directory that reads this repository's objects, holds one ref per line each chosen
commit is to carry and nothing else, and `git log --graph --simplify-by-decoration`
keeps those commits and the branch and merge structure between them. The repository
itself is never written to: its refs, config and objects are read, as git reads them.

A commit given N lines carries N refs; `%w(1,0,0)%D` writes their names one a line, so
git draws the commit as it draws a commit of N lines of text, and the lines after the
first carry the graph's column lines the way git continues a multi-line commit."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from majordomus.errors import RepositoryError
from majordomus.partialclone import PartialClone
from majordomus.repository import Repository, check_exit
from majordomus.tuples import NamedTuple
from majordomus.values import DrawnLine

REFS = "refs/majordomus-graph/"
MARK = "\x01"  # around a commit's id on its own line: nothing git draws is a control character
FORMAT = "--format=%x01%H%x01%w(1,0,0)%D"
# What locates or shapes the repository for git, replaced by the throwaway directory's own.
_ALTERNATES = "GIT_ALTERNATE_OBJECT_DIRECTORIES"
_FILTERS = re.compile(r"remote\..*\.partialclonefilter$")  # lowercased, as config_matching
_LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_NAMESPACE")


class Drawn(NamedTuple):
    lines: tuple[DrawnLine, ...]
    commits: frozenset[str]  # the commits git drew


def draw(
    repository: Repository,
    tips: Sequence[str],
    counts: Mapping[str, int],
    *,
    replacements: bool,
    colour: bool,
    limit: int | None = None,
) -> Drawn:
    """`git log --graph` of TIPS simplified to the commits of COUNTS (each drawn with as many
    lines as its count) and the merges and roots git keeps between them; at most LIMIT
    commits. REPLACEMENTS: the history is read through replacements (their refs copied).

    git judges a root commit by its files, not its refs: a root without files (`git commit
    --allow-empty` first) is left out however many refs it has. Such a root carrying
    records is drawn through a replacement made in the throwaway directory alone: the same
    commit with one file, under its own id."""
    try:
        # In TMPDIR as the command was given it (what git and every tool it runs use).
        where = repository.environ.get("TMPDIR") or None
        folder = tempfile.mkdtemp(prefix="majordomus-graph-", dir=where)
    except OSError as error:
        raise RepositoryError(
            f"cannot make a temporary folder for git to draw the graph in ({error.strerror}); "
            "set TMPDIR to a folder you can write to."
        ) from None
    try:
        gitdir = Path(folder)
        try:
            refs = _make_gitdir(repository, gitdir, counts, replacements, tips)
        except OSError as error:
            raise RepositoryError(
                f"cannot write git's drawing folder {folder} ({error.strerror})."
            ) from None
        env = _environ(repository, gitdir)
        replacing = "GIT_NO_REPLACE_OBJECTS" not in env
        if replacing and _may_lack_trees(repository):
            # git reads a root's tree to judge it: a treeless clone's roots, given a file.
            env = _give_a_file(_treeless_roots(tips, env), gitdir, env, refs)
        drawn = _log(tips, env, colour, limit)
        left = [commit for commit in counts if commit not in drawn.commits]
        if left and replacing:  # (with LIMIT: past it, often)
            roots = _empty_roots(left, env, len(tips[0]) == 64)
            if roots:
                env = _give_a_file(roots, gitdir, env, refs)
                drawn = _log(tips, env, colour, limit)
        return drawn
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _log(tips: Sequence[str], env: Mapping[str, str], colour: bool, limit: int | None) -> Drawn:
    args = [
        "log",
        "--graph",
        "--simplify-by-decoration",
        f"--decorate-refs={REFS}",
        "--no-show-signature",
        "--color=always" if colour else "--no-color",
        FORMAT,
        *([f"--max-count={limit}"] if limit is not None else []),
        "--stdin",
    ]
    return parse(_git(args, env, "".join(f"{tip}\n" for tip in tips)))


def _git(args: Sequence[str], env: Mapping[str, str], given: str = "") -> str:
    try:
        result = subprocess.run(
            ["git", *args],
            input=given,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=dict(env),
            check=False,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None
    check_exit(args[0], result.returncode, result.stderr)
    return result.stdout


EMPTY_TREES = {  # the tree of no files, in each object format
    False: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    True: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


def _empty_roots(commits: Sequence[str], env: Mapping[str, str], sha256: bool) -> list[str]:
    """Which of these commits are roots without files, as git reads them here."""
    out = _git(["log", "--no-walk=unsorted", "--format=%H %T %P", "--stdin"], env, _lines(commits))
    roots = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] == EMPTY_TREES[sha256]:
            roots.append(fields[0])
    return roots


def _own_objects(gitdir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The environment with the throwaway directory's objects first, where what it makes is
    written, and the repository's read after them (as it already is, once made so)."""
    own = str(gitdir / "objects")
    if env["GIT_OBJECT_DIRECTORY"] == own:
        return dict(env)
    borrowed = [env["GIT_OBJECT_DIRECTORY"], *filter(None, [env.get(_ALTERNATES)])]
    return {
        **env,
        "GIT_OBJECT_DIRECTORY": own,
        _ALTERNATES: os.pathsep.join(borrowed),
    }


def _may_lack_trees(repository: Repository) -> bool:
    """A partial clone whose filters may have left trees out: not only `blob:` filters
    (`blob:none`, as most partial clones are made, keeps every tree)."""
    if not PartialClone(repository).is_partial():
        return False
    filters = repository.config_matching(_FILTERS).values()
    return not filters or any(not f.strip().lower().startswith("blob:") for f in filters)


def _treeless_roots(tips: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The roots TIPS reach whose tree this clone lacks (a partial clone's, fetched with
    `--filter=tree:0`): the empty tree is never missing, so each has files."""
    out = _git(["log", "--max-parents=0", "--format=%T %H", "--stdin"], env, _lines(tips))
    trees = dict(line.split() for line in out.splitlines() if line)
    checked = _git(["cat-file", "--batch-check=%(objectname)"], env, _lines(list(trees)))
    missing = [line.split()[0] for line in checked.splitlines() if line.endswith(" missing")]
    return [trees[tree] for tree in missing]


def _give_a_file(
    roots: Sequence[str], gitdir: Path, env: Mapping[str, str], refs: list[str]
) -> dict[str, str]:
    """Each of ROOTS replaced, in the throwaway directory alone, by a copy with one file in
    its tree (its parents, author and message kept): REFS extended and written again.
    Returns the environment that writes the copies there and reads them."""
    env = _own_objects(gitdir, env) if roots else dict(env)
    if roots:
        blob = _git(["hash-object", "-w", "--stdin"], env, "drawn\n").strip()
        tree = _git(["mktree"], env, f"100644 blob {blob}\tdrawn\n").strip()
        base = _replace_base(env)
        refs += [f"{_with_tree(root, tree, env)} {base}{root}" for root in roots]
        _write_refs(gitdir, refs)
    return env


def _with_tree(root: str, tree: str, env: Mapping[str, str]) -> str:
    """A copy of ROOT with TREE for its tree, written where ENV writes objects."""
    raw = _git(["cat-file", "commit", root], env)
    head, _, rest = raw.partition("\n")
    copy = f"tree {tree}\n{rest}" if head.startswith("tree ") else raw
    return _git(["hash-object", "-t", "commit", "-w", "--stdin"], env, copy).strip()


def _lines(items: Sequence[str]) -> str:
    return "".join(f"{item}\n" for item in items)


def parse(out: str) -> Drawn:
    """git's lines, each told apart: a commit's own (its id between MARKs), the next lines of
    that commit (a ref's name after the graph), and the graph's lines between commits."""
    lines: list[DrawnLine] = []
    commits: set[str] = set()
    commit: str | None = None
    following = 0
    for text in out.splitlines():
        if MARK in text:
            graph, commit, _ = text.split(MARK, 2)
            commits.add(commit)
            lines.append(DrawnLine(graph, commit, 0))
            following = 0
            continue
        at = text.find(REFS)
        if at >= 0 and commit is not None:
            following += 1
            lines.append(DrawnLine(text[:at], commit, following))
        else:
            lines.append(DrawnLine(text.rstrip(" "), None, None))
    return Drawn(tuple(lines), frozenset(commits))


def _make_gitdir(
    repository: Repository,
    gitdir: Path,
    counts: Mapping[str, int],
    replacements: bool,
    tips: Sequence[str],
) -> list[str]:
    """The throwaway directory made, its refs written; returns them (`_write_refs`)."""
    (gitdir / "refs").mkdir()
    (gitdir / "objects").mkdir()
    (gitdir / "HEAD").write_text("ref: refs/heads/unborn\n", encoding="ascii")
    config = "[core]\n\trepositoryformatversion = 1\n\tbare = true\n"
    if any(len(tip) == 64 for tip in tips):
        config += "[extensions]\n\tobjectFormat = sha256\n"
    palette = repository.config_value("log.graphColors")  # the repository's own, if set
    if palette is not None:
        config += f"[log]\n\tgraphColors = {_quoted(palette)}\n"
    (gitdir / "config").write_text(config, encoding="utf-8")
    refs = [
        f"{commit} {REFS}{commit}/{n}" for commit, count in counts.items() for n in range(count)
    ]
    if replacements:
        refs += _replace_refs(repository)
    _write_refs(gitdir, refs)
    with contextlib.suppress(OSError):  # a shallow clone's boundary, as git reads it here
        shutil.copyfile(repository.commondir / "shallow", gitdir / "shallow")
    return refs


def _quoted(value: str) -> str:
    """VALUE as a git config file writes it: in double quotes, escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _write_refs(gitdir: Path, refs: Sequence[str]) -> None:
    """REFS (`id name` lines) as the directory's packed-refs file, sorted as git keeps it."""
    ordered = sorted(refs, key=lambda line: line.split(" ", 1)[1].encode())
    packed = "# pack-refs with: peeled fully-peeled sorted \n" + _lines(ordered)
    (gitdir / "packed-refs").write_text(packed, encoding="ascii")


def _replace_base(env: Mapping[str, str]) -> str:
    """Where git reads replacements under ENV (GIT_REPLACE_REF_BASE, or refs/replace/)."""
    base = env.get("GIT_REPLACE_REF_BASE") or "refs/replace/"
    return base if base.endswith("/") else base + "/"


def _replace_refs(repository: Repository) -> list[str]:
    base = _replace_base(repository.environ)
    listed = repository.git("for-each-ref", "--format=%(objectname) %(refname)", base)
    return [line for line in listed.stdout.splitlines() if line.strip()]


def _environ(repository: Repository, gitdir: Path) -> dict[str, str]:
    env = {k: v for k, v in repository.environ.items() if k not in _LOCATING}
    objects = env.get("GIT_OBJECT_DIRECTORY") or str(repository.commondir / "objects")
    grafts = repository.commondir / "info" / "grafts"
    if "GIT_GRAFT_FILE" not in env and grafts.exists():
        env["GIT_GRAFT_FILE"] = str(grafts)
    env.update(
        GIT_DIR=str(gitdir),
        GIT_OBJECT_DIRECTORY=os.path.abspath(objects),
        GIT_NO_LAZY_FETCH="1",  # a partial clone's missing object is never fetched by a read
        GIT_FLUSH="0",
        GIT_PAGER="cat",
    )
    return env
