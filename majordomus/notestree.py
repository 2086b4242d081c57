"""The layout of a notes tree, as git lays it out: a note named by the hex id of the object
it annotates, flat or fanned out into `ab/cdef…` subtrees; walked, searched and written.

Writes rebuild only the path to the notes they change and fan a crowded level out
the way git does, so git and majordomus read and write one ref without duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from majordomus.notetoml import MissingObjectError
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    import pygit2

TREE = 0o040000  # pygit2.enums.FileMode.TREE: git's modes, fixed by its tree format
BLOB = 0o100644  # pygit2.enums.FileMode.BLOB
FILES = (BLOB, 0o100755)  # the modes of a note: a blob, executable or not (never a symlink)
LINK = 0o120000  # a symlink: git reads no note from one, nor does majordomus (a gitlink neither)
_HEX = re.compile(r"[0-9a-f]+")
_HEX2 = re.compile(r"[0-9a-f]{2}")
# What an entry is that sits in a notes tree and is no note, by kind: a read counts it
# (see `OddEntry`) and never reads the object it names.
ODD_KINDS = {
    "link": "a symbolic link, not a note",
    "gitlink": "a gitlink (a submodule commit), not a note",
    "tree": "a tree where a note belongs",
    "name": "a name that is no commit id",
}


class OddEntry(NamedTuple):
    """An entry of a notes tree that is no note: its path as the tree spells it (printable,
    see `printable`), what it is (a key of ODD_KINDS) and the id of the object it names."""

    path: str
    kind: str
    oid: str

    @property
    def commit(self) -> str:
        """The commit its path names (a kind other than "name"), else ""."""
        return "" if self.kind == "name" else self.path.replace("/", "")

    @property
    def reason(self) -> str:
        return f"entry {self.path} is {ODD_KINDS[self.kind]}; not read"


def printable(name: str) -> str:
    """A tree entry's name fit for a line of text: bytes that are not UTF-8 and characters
    that are not printable (a newline, a tab) as backslash escapes."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(ord(c)) for c in text)


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _entry(tree: pygit2.Tree, name: str) -> pygit2.Object | None:
    return tree[name] if name in tree else None  # noqa: SIM401 (pygit2.Tree has no get)


def is_note_path(name: str) -> bool:
    return len(name) == 40 and _HEX.fullmatch(name) is not None


def tree(repo: pygit2.Repository, oid: pygit2.Oid) -> pygit2.Tree:
    """The tree `oid` names; MissingObjectError when this clone does not have it."""
    import pygit2

    try:
        found = repo[oid]
    except KeyError:
        raise MissingObjectError(str(oid)) from None
    assert isinstance(found, pygit2.Tree)
    return found


def walk(
    repo: pygit2.Repository,
    root: pygit2.Tree,
    prefix: str = "",
    missing: set[str] | None = None,
    odd: list[OddEntry] | None = None,
) -> Iterator[tuple[str, str]]:
    """(annotated object, note blob) for every note under `root`, at any fan-out depth: a
    blob, executable or not, at a 40-digit path, as git reads notes.

    With `missing`, the ids of subtrees not in this clone are added to it and skipped;
    without, the first one stops the walk (MissingObjectError). With `odd`, every other
    entry (a symlink, a gitlink, a tree that is not a fan-out, any other name) is added to
    it, in the walk's order; nothing under such a tree is looked at.
    """
    import pygit2

    for entry in root:
        name = entry.name or ""
        kind = "name"
        if isinstance(entry, pygit2.Tree):
            if _HEX2.fullmatch(name) and len(prefix) < 38:
                try:
                    sub = tree(repo, entry.id)
                except MissingObjectError:
                    if missing is None:
                        raise
                    missing.add(str(entry.id))
                    continue
                yield from walk(repo, sub, prefix + name, missing, odd)
                continue
            if is_note_path(prefix + name):
                kind = "tree"
        elif is_note_path(prefix + name):
            mode = entry.filemode
            if mode in FILES:
                yield prefix + name, str(entry.id)
                continue
            kind = "link" if mode == LINK else "gitlink"
        if odd is not None:
            folders = "".join(prefix[at : at + 2] + "/" for at in range(0, len(prefix), 2))
            odd.append(OddEntry(folders + printable(name), kind, str(entry.id)))


# What `changed` names among the objects whose notes differ when an entry that names no
# commit differs: no commit's notes tell what it counts for.
NAMELESS = ""


def changed(
    repo: pygit2.Repository,
    old: pygit2.Tree | None,
    new: pygit2.Tree | None,
    prefix: str = "",
) -> set[str]:
    """The annotated objects whose notes differ between two notes trees: only the subtrees
    that differ are opened (one note changed among 100,000 opens three trees a side),
    at any fan-out, either side fanned out or not; MissingObjectError for a subtree that
    is not here. (libgit2's diff of the two trees reads every entry of both: 40 to 200 ms
    and 200 MiB for that one note, against 0.4 ms here.) An entry that is no note differs
    as notes do (a symlink made of a note's blob, a tree where a note belongs), a change
    of mode alone that a read reads alike (executable or not) does not; an entry whose
    name is no commit id adds NAMELESS."""
    import pygit2

    found: set[str] = set()
    before = {entry.name or "": entry for entry in old} if old is not None else {}
    after = {entry.name or "": entry for entry in new} if new is not None else {}
    for name in before.keys() | after.keys():
        a, b = before.get(name), after.get(name)
        if (
            a is not None
            and b is not None
            and a.id == b.id
            and type(a) is type(b)
            and (isinstance(a, pygit2.Tree) or _same_kind(a.filemode, b.filemode))
        ):
            continue
        subtrees: list[pygit2.Tree | None] = []
        fanned = _HEX2.fullmatch(name) is not None and len(prefix) < 38
        for entry in (a, b):
            if isinstance(entry, pygit2.Tree) and fanned:
                subtrees.append(tree(repo, entry.id))
            else:
                subtrees.append(None)
                if entry is not None:
                    found.add(prefix + name if is_note_path(prefix + name) else NAMELESS)
        if subtrees[0] is not None or subtrees[1] is not None:
            found |= changed(repo, subtrees[0], subtrees[1], prefix + name)
    return found


def _same_kind(mode: int, other: int) -> bool:
    """Whether two modes of an entry that is not a tree are read alike: a note either way
    (executable or not), or the same kind of entry that is no note."""
    return mode == other or (mode in FILES and other in FILES)


def walk_present(
    repo: pygit2.Repository, tree_id: str, missing: set[str], odd: list[OddEntry] | None = None
) -> Iterator[tuple[str, str]]:
    """`walk` over the trees that are here; the ids of those that are not go to `missing`."""
    import pygit2

    try:
        root = tree(repo, pygit2.Oid(hex=tree_id))
    except MissingObjectError:
        missing.add(tree_id)
        return
    yield from walk(repo, root, "", missing, odd)


def find(repo: pygit2.Repository, root: pygit2.Tree, rest: str) -> Iterator[pygit2.Oid]:
    """Every copy of the note for `rest` a read reads, at any fan-out depth: as `walk`,
    every blob (executable or not) at its paths."""
    for oid, kind in find_kinds(repo, root, rest):
        if kind == "note":
            yield oid


def find_kinds(
    repo: pygit2.Repository, root: pygit2.Tree, rest: str
) -> Iterator[tuple[pygit2.Oid, str]]:
    """Every entry at a path of the note for `rest`, at any fan-out depth, with what it is:
    "note", or the kind of entry (`ODD_KINDS`) `walk` counts there: a tree at the full
    path among them (one named by the last two digits, at the deepest level a walk enters)."""
    import pygit2

    flat = _entry(root, rest)
    if flat is not None:
        if isinstance(flat, pygit2.Tree):  # never a fan-out: two digits are left only at
            yield flat.id, "tree"  # the 38th, which a walk does not enter
        else:
            mode = flat.filemode
            yield flat.id, "note" if mode in FILES else "link" if mode == LINK else "gitlink"
    fan = rest[:2]
    if len(rest) > 2 and fan in root:
        sub = root[fan]
        if isinstance(sub, pygit2.Tree):
            yield from find_kinds(repo, tree(repo, sub.id), rest[2:])


def walk_files(
    repo: pygit2.Repository, root: pygit2.Tree, prefix: str = ""
) -> Iterator[tuple[str, str, bool]]:
    """Every entry but a tree at a note path (as `walk` finds notes, symlinks included),
    with whether it is a file: what a merge looks at."""
    import pygit2

    for entry in root:
        name = entry.name or ""
        if isinstance(entry, pygit2.Tree):
            if _HEX2.fullmatch(name) and len(prefix) < 38:
                yield from walk_files(repo, tree(repo, entry.id), prefix + name)
        elif is_note_path(prefix + name):
            yield prefix + name, str(entry.id), entry.filemode in FILES


def insert(
    repo: pygit2.Repository, root: pygit2.Tree | None, rest: str, blob_id: pygit2.Oid
) -> pygit2.Oid:
    """The tree with the note for `rest` at the place git would look, every other copy gone."""
    return insert_many(repo, root, {rest: blob_id})


def insert_many(
    repo: pygit2.Repository, root: pygit2.Tree | None, notes: Mapping[str, pygit2.Oid]
) -> pygit2.Oid:
    """The tree with these notes (name: the remaining hex digits) where git would look
    for them, every other copy gone, each tree on the way written once.

    Into the subtrees where a level is fanned out, else flat, then fanned out if
    the level is crowded: the same layout as inserting them one by one.
    """
    import pygit2

    builder = repo.TreeBuilder(root) if root is not None else repo.TreeBuilder()
    for rest in notes:
        if builder.get(rest) is not None:
            builder.remove(rest)
    fanned = root is not None and any(
        isinstance(entry, pygit2.Tree) and _HEX2.fullmatch(entry.name or "") for entry in root
    )
    if fanned:
        assert root is not None
        groups: dict[str, dict[str, pygit2.Oid]] = {}
        for rest, blob_id in notes.items():
            if len(rest) > 2:
                groups.setdefault(rest[:2], {})[rest[2:]] = blob_id
            else:
                builder.insert(rest, blob_id, BLOB)
        for fan, group in groups.items():
            sub_entry = _entry(root, fan)
            sub = tree(repo, sub_entry.id) if isinstance(sub_entry, pygit2.Tree) else None
            if sub_entry is not None and sub is None:
                builder.remove(fan)
            builder.insert(fan, insert_many(repo, sub, group), TREE)
        return builder.write()
    for rest, blob_id in notes.items():
        builder.insert(rest, blob_id, BLOB)
    level = repo[builder.write()]
    assert isinstance(level, pygit2.Tree)
    return _fan_out(repo, level, len(next(iter(notes))))


def _fan_out(repo: pygit2.Repository, level: pygit2.Tree, width: int) -> pygit2.Oid:
    """Fan a flat level out the way git does once it is crowded enough.

    git moves a level into two-digit subtrees when every one of the sixteen
    values of the next hex digit is shared by at least two notes (notes.c,
    determine_fanout); the same test is then applied inside each subtree.
    """
    import pygit2

    notes = [
        entry
        for entry in level
        if not isinstance(entry, pygit2.Tree)  # (a mode is an enum: 20 times slower to ask)
        and len(entry.name or "") == width
        and _HEX.fullmatch(entry.name or "")
    ]
    counts: dict[str, int] = {}
    for entry in notes:
        counts[(entry.name or "")[0]] = counts.get((entry.name or "")[0], 0) + 1
    if width <= 2 or len(counts) < 16 or min(counts.values()) < 2:
        return level.id
    groups: dict[str, list[Any]] = {}
    for entry in notes:
        groups.setdefault((entry.name or "")[:2], []).append(entry)
    builder = repo.TreeBuilder(level)
    for fan, entries in groups.items():
        sub = repo.TreeBuilder()
        for entry in entries:
            builder.remove(entry.name)
            sub.insert((entry.name or "")[2:], entry.id, entry.filemode)
        sub_tree = repo[sub.write()]
        assert isinstance(sub_tree, pygit2.Tree)
        builder.insert(fan, _fan_out(repo, sub_tree, width - 2), TREE)
    return builder.write()
