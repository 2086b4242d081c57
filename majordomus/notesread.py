"""Reading notes: every note of the local and remote-tracking notes refs in one pass,
through the read cache; in a partial clone, the note objects it left out fetched in
one batch first; many notes parsed at once through the document cache.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, NoReturn

from majordomus import gitobjects, notestree
from majordomus.blobs import NoteBlobs
from majordomus.cachefile import FILES as CACHE_FILES
from majordomus.cachefile import READ_FILE_NAME as CACHE_FILE
from majordomus.cachefile import RECORDS_FILE_NAME as DOCUMENTS_FILE
from majordomus.cachefile import VIEWS_FOLDER_NAME, framed, frames_of
from majordomus.documentcache import DocumentCache
from majordomus.errors import RepositoryError
from majordomus.gitfiles import REMOTE_NOTES_PREFIX
from majordomus.noteforms import unnamed_file
from majordomus.notes import Note, Shown, every_note, summarise, union
from majordomus.notetoml import MissingObjectError, NoteError
from majordomus.readcache import BlobEntry, ReadCache, blob_entry, plain_entry
from majordomus.records import Summary
from majordomus.repository import NOTES_REF, not_a_commit
from majordomus.values import NoteSet, NotesOn, UnreadableNote

if TYPE_CHECKING:
    import pygit2

    from majordomus.repository import Repository

REMOTE_NOTES_SUFFIX = "/majordomus"
# Fetches note objects a partial clone left out, in one batch; returns the remote it
# asked and why it failed (or None).
Fetcher = Callable[[Sequence[str]], tuple[str, str | None]]


class NotesReader:
    """The notes of one repository, for reading."""

    def __init__(self, repository: Repository) -> None:
        """Until libgit2 is loaded, a plain layout's refs and the few objects a read the
        cache answers needs are read by git (see `Repository.objects_by_git`)."""
        self.repository = repository
        self.commondir = repository.commondir
        self.blobs = NoteBlobs(lambda: repository.repo, repository.objects_by_git, self.stored)
        self.fetch_missing: Fetcher | None = None
        self._disk_cache: ReadCache | None = None
        self._documents: DocumentCache | None = None
        self._current_blobs: Collection[str] = ()
        # Told once per ref that a remote-tracking notes ref is left out (see `skipped`).
        self.warn: Callable[[str], None] | None = None
        self.skipped: dict[str, str] = {}  # remote-tracking notes ref -> its non-commit target

    @property
    def repo(self) -> pygit2.Repository:
        return self.repository.repo

    def notes_refs(self) -> list[str]:
        """The local notes ref and every remote-tracking one that points at a commit."""
        names = [NOTES_REF] if NOTES_REF in self.repo.references else []
        names += sorted(
            name
            for name in self.repo.references
            if name.startswith(REMOTE_NOTES_PREFIX)
            and name.endswith(REMOTE_NOTES_SUFFIX)
            and self.is_read(name, str(self.repo.references[name].resolve().target))
        )
        return names

    def is_read(self, name: str, target: str, kind: str | None = None) -> bool:
        """Whether a notes ref is read: the local one always (a target that is not a commit
        then stops the command), a remote-tracking one only when it points at a commit
        (`kind`, when known; else libgit2 is asked). A teammate can push a blob or a tag
        as the notes ref, and a plain `git fetch` brings it: every command goes on
        without it, and says so once."""
        if name == NOTES_REF:
            return True
        if kind is None:
            import pygit2  # here: a read the caches answer never loads libgit2

            kind = "commit" if isinstance(self.repo.get(target), pygit2.Commit) else "other"
        if kind == "commit":
            return True
        if name not in self.skipped:
            self.skipped[name] = target
            if self.warn is not None:
                self.warn(skipped_ref(name, target))
        return False

    def ref_targets(self) -> dict[str, str]:
        """Each notes ref and its target: cheap, for noticing that something was written.
        Read from the ref files when the layout is plain; a target that is not a commit is
        then refused by the read that follows, which opens it."""
        found = self.plain_targets()
        if found is not None:
            return found
        targets = {}
        for name in self.notes_refs():
            ref = self.repo.references.get(name)
            if ref is not None:
                targets[name] = str(ref.resolve().target)
                self.notes_commit(name, targets[name])
        return targets

    def plain_targets(self) -> dict[str, str] | None:
        """The notes refs' targets read from a plain layout's ref files; None when it is not."""
        refs = self.repository.refs
        return None if refs is None else refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX)

    def notes_commit(self, name: str, target: str) -> pygit2.Commit:
        """The commit a notes ref points at; a ref at anything else stops every command."""
        import pygit2

        obj = self.repo.get(target)
        if isinstance(obj, pygit2.Commit):
            return obj
        if name == NOTES_REF:
            raise RepositoryError(not_a_commit(target))
        raise RepositoryError(
            f"{name} points at {target[:12]}, which is not a commit; majordomus will not read "
            f"it: inspect it with git cat-file -t {target[:12]}, then delete it "
            f"(git update-ref -d {name}) and fetch again."
        )

    def read_notes(self, *, shown: Shown | None = None) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache).
        `shown`: which notes the caller goes on to show whole (`preload`): a read that
        parses the notes keeps those for the document cache as it parses them.

        In a partial clone, note objects the clone left out are fetched from the
        promisor remote in one batch (`fetch_missing`), then read; when they cannot
        be, the read stops (exit 3) rather than answer from what happens to be here.
        """
        noteset, missing = self._read_present(shown)
        if not missing or not self.is_partial():
            return noteset
        remote, reason = "the promisor remote", "majordomus did not ask it"
        asked: set[str] = set()
        # One batch brings each tree with everything under it; a second round is
        # only for objects the first could not name (under a tree that was missing).
        while self.fetch_missing is not None and missing - asked:
            asked |= missing
            remote, reason = self._asked(sorted(missing))
            noteset, missing = self._read_present(shown)
        if missing:
            raise RepositoryError(_unsent(len(missing), remote, reason))
        return noteset

    def fetch_lost(self, blob: str, note: Sequence[str]) -> None:
        """A note object an earlier read summarised (its summary is kept by id) that is not
        here now, one of the blobs of a `note`: fetched from the promisor remote of a
        partial clone, with every other note object of this read lost likewise, in one
        batch; when they cannot be, or the clone is not partial, the command stops (exit 3)
        with what to run."""
        if not self.is_partial():
            raise RepositoryError(
                f"note object {blob[:12]} is missing from this clone, though an earlier "
                f"read found it; run majordomus doctor to see what else is missing, then "
                f"majordomus doctor --drop-cache to read every note afresh."
            )
        odb = self.repo.odb
        lost = [b for b in dict.fromkeys([*note, *self._current_blobs]) if not odb.exists(b)]
        remote, reason = "the promisor remote", "majordomus did not ask it"
        if self.fetch_missing is not None:
            remote, reason = self._asked(lost)
        unsent = [b for b in note if not odb.exists(b)]
        if unsent:
            raise RepositoryError(_unsent(len(unsent), remote, reason))

    def _asked(self, ids: Sequence[str]) -> tuple[str, str]:
        """The promisor remote asked for these objects in one batch: its name, and why
        what is still missing after it is (its fetch failed, or it does not have them)."""
        assert self.fetch_missing is not None
        remote, failure = self.fetch_missing(ids)
        return remote, failure or "it does not have them"

    def _read_present(self, shown: Shown | None) -> tuple[NoteSet, set[str]]:
        """The notes whose objects are here, and the ids of the note objects that are not.

        A missing object is never cached: it can arrive with the next fetch.
        """
        cache = self._read_cache()
        # Commit -> its note blob on the first ref read (the usual case, kept as the bare
        # id), or blob -> first ref holding it when another ref holds another note on it.
        found: dict[str, str | dict[str, str]] = {}
        first = ""
        walked = False
        unreadable: list[UnreadableNote] = []
        targets: dict[str, str] = {}
        trees: list[str] = []
        missing: set[str] = set()
        held_trees: list[tuple[str, str]] = []  # each ref, its notes as `cache.trees` has them
        # Each entry that is no note, once over every ref (as a note blob is): the first
        # ref that holds it names it.
        odd: set[tuple[str, str, str]] = set()
        for name, target, tree_id in self._trees():
            targets[name] = target
            trees.append(tree_id)
            flat = cache.trees.get(tree_id)
            if flat is None:
                flat = self.repository.tree_notes_by_git(tree_id)  # by git: no object mapped here
                if flat is not None:
                    cache.put_tree(tree_id, flat)
            if flat is None:
                walked = True
                lacking: set[str] = set()
                found_odd: list[notestree.OddEntry] = []
                with _uncached():
                    walk = notestree.walk_present(self.repo, tree_id, lacking, found_odd)
                    flat = "".join(commit + blob for commit, blob in walk)
                if lacking:
                    missing |= lacking
                    for object_id in sorted(lacking):
                        reason = f"notes tree {object_id[:12]} is missing; not read"
                        unreadable.append(UnreadableNote("", name, reason))
                else:
                    cache.put_tree(tree_id, flat, found_odd)
                entries: Sequence[notestree.OddEntry] = found_odd
            else:
                entries = tuple(map(notestree.OddEntry._make, cache.odd.get(tree_id, ())))
            for no_note in entries:
                # One object at two paths of one commit (flat, fanned out) is one entry,
                # as one blob there is one note (`notes_on` counts them so).
                key = (no_note.commit or no_note.path, no_note.kind, no_note.oid)
                if key not in odd:
                    odd.add(key)
                    unreadable.append(UnreadableNote(no_note.commit, name, no_note.reason))
            held_trees.append((name, flat))
        # The blobs to parse, each once, in order, as one string: the helpers forked to
        # parse them start from this process as it is now, so it holds no object per note
        # yet; and a helper given a run of ids in order reads only its part of the pack
        # index (it is ordered by id), not all of it.
        unread = "".join(
            sorted(
                {
                    blob
                    for _, flat in held_trees
                    for _, blob in _pairs(flat)
                    if blob not in cache.blobs
                }
            )
        )
        if len(unread) // 40 >= SHARED_READ_MIN:
            if walked:
                # The walk mapped the pack index (~130 MiB resident at 1,000,000 commits):
                # unmapped before the helpers are forked, it is in none of the processes
                # at once with what each of them builds.
                self.repo.free()
            put_form = None if shown is None else self._document_cache().put_form
            _summarised_in_workers(str(self.repo.path), unread, cache.put_blob, put_form, shown)
            # What no helper sent (none could be had, or one died), read in batches here.
            left = [blob for blob in _ids(unread) if blob not in cache.blobs]
            for blob, summarised, _ in _parsed(self.blobs, left):
                cache.put_blob(blob, summarised)
            del left
        elif unread:
            self.blobs.prefetch(list(_ids(unread)))
        del unread
        for name, flat in held_trees:
            if not found:  # the first ref: one note per commit, unless its tree is damaged
                found, first = dict(_pairs(flat)), name
                if len(found) == len(flat) // 80:
                    continue
                found = {}
            for commit, blob in _pairs(flat):
                held = found.get(commit)
                if held is None:
                    found[commit] = blob if name == first else {blob: name}
                elif isinstance(held, str):
                    if held != blob:
                        found[commit] = {held: first, blob: name}
                else:
                    held.setdefault(blob, name)
        del held_trees
        commits: dict[str, NotesOn] = {}
        known = cache.blobs
        for commit, held in found.items():
            if isinstance(held, str):  # the usual commit: one note, its summary cached
                entry = known.get(held)
                if entry is not None and not isinstance(entry, str):
                    commits[commit] = NotesOn((held,), entry[0], entry[1])
                    continue
            notes = {held: first} if isinstance(held, str) else held
            on = self._united(commit, notes, self._cached_entry, unreadable, missing)
            if on is not None:
                commits[commit] = on
        self._current_blobs = BlobIds(
            blob for held in found.values() for blob in ((held,) if isinstance(held, str) else held)
        )
        saved = cache.save(trees, self._current_blobs)
        if self._documents is not None:  # the notes the helpers sent whole: out of memory
            put = self._documents.put_blobs
            kept = [on for on in commits.values() if on.blobs[0] in put]  # one task's, often
            kept.sort(key=_newest, reverse=True)
            self._documents.save(self._current_blobs, (b for on in kept for b in on.blobs))
        if len(found) >= SHARED_READ_MIN:
            if walked:
                self.repo.free()  # mapped again by what the helpers did not send, if any
            if saved and not missing:
                self._disk_cache = None  # loaded again if this command reads once more
        del found
        return NoteSet(commits, tuple(unreadable), targets, len(missing)), missing

    def is_partial(self) -> bool:
        """Whether git may have left objects out of this clone (a promisor remote is set)."""
        import pygit2

        config = self.repo.config
        for entry in config:
            name = entry.name.lower()
            if name == "extensions.partialclone" and entry.value:
                return True
            if name.startswith("remote.") and name.endswith(".promisor"):
                with contextlib.suppress(pygit2.GitError, ValueError):
                    if config.get_bool(entry.name):
                        return True
        return False

    def _document_cache(self) -> DocumentCache:
        if self._documents is None:
            self._documents = DocumentCache(self.commondir / DOCUMENTS_FILE)
        return self._documents

    def _read_cache(self) -> ReadCache:
        if self._disk_cache is None:
            self._disk_cache = ReadCache(self.commondir / CACHE_FILE)
        return self._disk_cache

    def drop_cache(self) -> bool:
        """Remove every derived cache file; the next command rebuilds what it needs."""
        dropped = False
        for name in CACHE_FILES:
            with contextlib.suppress(FileNotFoundError):
                (self.commondir / name).unlink()
                dropped = True
        folder = self.commondir / VIEWS_FOLDER_NAME
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            dropped = True
        self._disk_cache = self._documents = None
        return dropped

    def _united(
        self,
        commit: str,
        held: dict[str, str],
        entry_of: Callable[[str], BlobEntry | None],
        unreadable: list[UnreadableNote],
        missing: set[str],
    ) -> NotesOn | None:
        """One commit's notes (blob -> the first ref holding it) as one: the summaries of
        the readable ones (`entry_of` each blob); each unreadable or missing one added to
        `unreadable` (and `missing`). None when none is readable."""
        readable: list[tuple[str, tuple[tuple[Summary, ...], int]]] = []
        for blob, name in held.items():
            entry = entry_of(blob)
            if entry is None:
                missing.add(blob)
                why = f"note object {blob[:12]} is missing; not read"
                unreadable.append(UnreadableNote(commit, name, why))
            elif isinstance(entry, str):
                unreadable.append(UnreadableNote(commit, name, entry))
            else:
                readable.append((blob, entry))
        if len(readable) == 1:
            blob, (summaries, invalid) = readable[0]
            return NotesOn((blob,), summaries, invalid)
        if not readable:
            return None
        ids = tuple(blob for blob, _ in readable)
        try:
            note = self.blobs.note(ids)
        except MissingObjectError as error:  # summarised once, gone since: missing, as any
            lost = error.object_id
            missing.add(lost)
            unreadable.append(UnreadableNote(commit, held[lost], str(error)))
            rest = {blob: name for blob, name in held.items() if blob != lost}
            return self._united(commit, rest, entry_of, unreadable, missing)
        return NotesOn(ids, summarise(note), note.invalid)

    def _cached_entry(self, blob: str) -> BlobEntry | None:
        """A note's summaries (or why it is unreadable) from the read cache, or parsed and
        kept there; None when its blob is not here."""
        cache = self._read_cache()
        entry = cache.blobs.get(blob)
        if entry is None:
            entry = _entry(self.blobs, blob)
            if entry is not None:
                cache.put_blob(blob, entry)
        return entry

    def _parsed_entry(self, blob: str) -> BlobEntry | None:
        """The same, parsed (for a few notes of many: the read cache is not loaded whole)."""
        return _entry(self.blobs, blob)

    def listing(self) -> Listing | None:
        """The notes of every notes ref as the trees list them (no note read), from the
        listings the read cache keeps or git gives; None when a tree is listed by neither
        (`read_notes` walks it)."""
        cache = self._read_cache()
        found: list[tuple[str, str, str]] = []
        for name, target, tree_id in self._trees():
            flat = cache.trees.get(tree_id)
            if flat is None:
                flat = self.repository.tree_notes_by_git(tree_id)
            if flat is None:
                return None
            found.append((name, target, flat))
        return Listing(tuple(found))

    def notes_of(self, listing: Listing, commits: Collection[str]) -> NoteSet:
        """The notes of these commits of `listing`, as `read_notes` reads them: for a few
        commits of many, each read alone (parsed, not the read cache loaded whole); an
        object not here is counted in `missing`."""
        held: dict[str, dict[str, str]] = {}
        for name, _, flat in listing.refs:
            for at in range(0, len(flat), 80):  # no pair made per note: most are not wanted
                if flat[at : at + 40] in commits:
                    notes = held.setdefault(flat[at : at + 40], {})
                    notes.setdefault(flat[at + 40 : at + 80], name)
        self.blobs.prefetch([blob for notes in held.values() for blob in notes])
        found: dict[str, NotesOn] = {}
        unreadable: list[UnreadableNote] = []
        missing: set[str] = set()
        for commit, notes in held.items():
            on = self._united(commit, notes, self._parsed_entry, unreadable, missing)
            if on is not None:
                found[commit] = on
        targets = {name: target for name, target, _ in listing.refs}
        return NoteSet(found, tuple(unreadable), targets, len(missing))

    def _trees(self) -> list[tuple[str, str, str]]:
        """Each notes ref, its target and the id of that commit's tree."""
        plain = self._plain_trees()
        if plain is not None:
            return plain
        return [(name, *self.notes_tree_id(name)) for name in self.notes_refs()]

    def _plain_trees(self) -> list[tuple[str, str, str]] | None:
        """The same from the ref files and one git process, while libgit2 is not loaded
        (the read cache may then answer the rest); None: ask libgit2."""
        if (targets := self.plain_targets()) is None:
            return None
        if not targets:
            return []
        found = self.repository.objects_by_git(list(targets.values()))
        if found is None:
            return None
        trees = []
        for name, target in targets.items():
            held = found.get(target)
            if held is not None and not self.is_read(name, target, held[0]):
                continue
            tree = _tree_of(held)
            if tree is None:
                return None  # not a commit, or not here: libgit2 says which
            trees.append((name, target, tree))
        return trees

    def notes_tree_id(self, name: str) -> tuple[str, str]:
        """A notes ref's target and the id of its tree, which may be missing from a partial
        clone; a ref at anything but a commit stops every command."""
        target = str(self.repo.references[name].resolve().target)
        return target, str(self.notes_commit(name, target).tree_id)

    def notes_commits(self) -> list[str]:
        """The commit each notes ref points at (what holds every object the notes need)."""
        import pygit2

        targets = [str(self.repo.references[name].resolve().target) for name in self.notes_refs()]
        return [t for t in targets if isinstance(self.repo.get(t), pygit2.Commit)]

    def preload(self, blobs: Collection[str], order: Iterable[str] = ()) -> None:
        """Before many notes are shown whole: the document cache made to hold them all
        (decoding beats parsing TOML), so that each is read from it when shown. Notes
        this command parsed already (a read without its read cache) go into it as they
        are, for the next command. Many notes it lacks (every task shown after one
        task's first read) are parsed by forked helpers, as a first read's are. The
        others are read by one git process (in a plain layout, so never a partial clone)
        even when libgit2 is loaded: a few thousand notes read by libgit2 map most of the
        pack index into this process (~130 MiB resident at 1,000,000 commits), and git's
        process ends with the read. Past PRELOAD_BY_GIT_MAX notes, libgit2 reads them
        (quicker, and the records shown outweigh the index). The notes kept anew are
        written in the `order` given (iterated only then), those it leaves out after."""
        documents = self._document_cache()
        unread = [b for b in blobs if not documents.has(b)]
        fresh = sorted(b for b in unread if not self.blobs.is_parsed(b))
        if len(fresh) >= SHARED_READ_MIN:
            _summarised_in_workers(
                str(self.commondir), "".join(fresh), None, documents.put_form, every_note
            )
            unread = [b for b in unread if not documents.has(b)]
        del fresh
        by_git = 1 < sum(1 for b in unread if not self.blobs.is_parsed(b)) <= PRELOAD_BY_GIT_MAX
        for start in range(0, len(unread), FRAME_ENTRIES):  # a batch's bytes at a time
            batch = unread[start : start + FRAME_ENTRIES]
            left = [b for b in batch if not self.blobs.is_parsed(b)]
            if left and by_git and self.repository.refs is not None:
                self.blobs.prefetch(left, self.repository.shown_by_git(left))
            else:
                self.blobs.prefetch(left)  # by git while libgit2 is not loaded
            for blob in batch:
                parsed = self.blobs.parse(blob)
                if isinstance(parsed, Note):
                    documents.put(blob, parsed)
            # Kept here only what the cache does not keep (a note salvaged, unreadable).
            self.blobs.forget(filter(documents.has, batch))
        # Pruned to the current notes when this command read them all; else kept whole
        # (the notes shown are not all the notes there are).
        documents.save(self._current_blobs or None, order)

    def load(self, blobs: Iterable[str]) -> None:
        """The notes of these blobs the document cache holds, read from it in one go (a
        part of the records shown, about to be located; `NoteBlobs.forget` lets them go)."""
        if self._documents is not None:
            for blob, note in self._documents.get_many(blobs):
                self.blobs.remember(blob, note)

    def texts(self, blobs: Iterable[str]) -> dict[str, tuple[str | None, ...]]:
        """The texts of the records of these blobs the document cache holds (see
        DocumentCache.texts_many), read from it in one go."""
        return {} if self._documents is None else dict(self._documents.texts_many(blobs))

    def stored(self, blob: str) -> Note | None:
        """A note as the document cache holds it, once a command asked for it (`preload`)."""
        return None if self._documents is None else self._documents.get(blob)

    def skipped_refs(self) -> list[str]:
        """What is wrong with each remote-tracking notes ref this command left out (it does
        not point at a commit), and how to remove it."""
        return [skipped_ref(name, target) for name, target in self.skipped.items()]

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process). A blob a read
        cache summarised that is not here any more is fetched first (`fetch_lost`)."""
        try:
            return self.blobs.note(blobs)
        except MissingObjectError as error:
            self.fetch_lost(error.object_id, blobs)  # exit 3 unless all are here now
            return self.blobs.note(blobs)

    def notes_on(
        self, commit: str, targets: Mapping[str, str] | None = None
    ) -> tuple[tuple[str, ...], int] | None:
        """The readable note blobs attached to one commit over every notes ref (or over the
        notes commits `targets` names, in that order), and how many of its notes are
        unreadable (entries at its note's paths that are no note among them: a symlink,
        a gitlink, a tree, each object once per kind, as `read_notes` counts them), found
        without walking the notes trees; None when an object on the way is missing
        (`read_notes` fetches it, or says why it cannot)."""
        # While libgit2 is not loaded, one git process finds the notes and reads them.
        with self.repository.git_batch() as batch:
            if batch is not None:
                chosen = targets if targets is not None else self.plain_targets()
                try:
                    if chosen is not None:
                        attached = gitobjects.attached_notes(batch, list(chosen.values()), commit)
                        if attached is None:
                            return None
                        notes, odd = attached
                        return self._readable(notes, len(odd))
                except gitobjects.UnsureError:
                    pass  # libgit2 reads it, or refuses it with its own message
        import pygit2

        blobs: dict[str, None] = {}
        others: dict[tuple[str, str], None] = {}
        try:
            if targets is None:
                trees = [self.notes_tree_id(name)[1] for name in self.notes_refs()]
            else:
                trees = [
                    str(self.notes_commit(n, t).tree_id)
                    for n, t in targets.items()
                    if self.is_read(n, t)
                ]
            for tree_id in trees:
                root = notestree.tree(self.repo, pygit2.Oid(hex=tree_id))
                for oid, kind in notestree.find_kinds(self.repo, root, commit):
                    if kind == "note":
                        blobs[str(oid)] = None
                    else:
                        others[kind, str(oid)] = None
        except MissingObjectError:
            return None
        return self._readable(list(blobs), len(others))

    def _readable(self, blobs: Sequence[str], odd: int) -> tuple[tuple[str, ...], int] | None:
        """The readable ones of a commit's note blobs, and how many are not (with `odd`
        entries that are no note); None when one is missing."""
        readable: list[str] = []
        unreadable = odd
        for blob in blobs:
            parsed = self.blobs.parse(blob)
            if isinstance(parsed, MissingObjectError):
                return None
            if isinstance(parsed, NoteError):
                unreadable += 1
            else:
                readable.append(blob)
        return tuple(readable), unreadable

    def changed_notes(self, old: str, new: str) -> set[str] | None:
        """The commits whose notes differ between two notes commits, from a comparison of
        their trees that skips every subtree the two share; None when either is not here,
        or an entry that names no commit differs (what it counts for is in no commit's
        notes)."""
        import pygit2

        try:
            commits = [self.repo[target] for target in (old, new)]
            if not all(isinstance(commit, pygit2.Commit) for commit in commits):
                return None  # a notes ref at a tree or a tag is not read (NotesReader.is_read)
            old_tree, new_tree = (commit.peel(pygit2.Tree) for commit in commits)
            found = notestree.changed(self.repo, old_tree, new_tree)
        except (KeyError, ValueError, pygit2.GitError, MissingObjectError):
            return None
        return None if notestree.NAMELESS in found else found

    def note_copies(self, tree: pygit2.Tree | None) -> dict[str, list[str]]:
        """Annotated object -> the blob ids of its notes (more than one only in a damaged tree)."""
        copies: dict[str, list[str]] = {}
        if tree is None:
            return copies
        flat = self._read_cache().trees.get(str(tree.id))
        for commit, blob_id in notestree.walk(self.repo, tree) if flat is None else _pairs(flat):
            copies.setdefault(commit, []).append(blob_id)
        return copies


# Notes a command shows whole that git reads for it rather than libgit2: git takes ~25 us a
# note against libgit2's ~10, and spares this process the pack index (see `preload`).
PRELOAD_BY_GIT_MAX = 16384


def skipped_ref(name: str, target: str) -> str:
    """What every command says of a remote-tracking notes ref it leaves out."""
    return (
        f"{name} points at {target[:12]}, which is not a commit, so its records are left out; "
        f"remove it with git update-ref -d {name}, then run majordomus fetch."
    )


class BlobIds(Collection[str]):
    """Object ids held as one sorted string: 100,000 of them in 4 MB and one allocation,
    not 100,000 small objects kept alive among everything a read builds and lets go."""

    def __init__(self, ids: Iterable[str]) -> None:
        self._ids = "".join(sorted(set(ids)))

    def __len__(self) -> int:
        return len(self._ids) // 40

    def __iter__(self) -> Iterator[str]:
        return _ids(self._ids)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str) or len(item) != 40:
            return False
        ids, low, high = self._ids, 0, len(self._ids) // 40
        while low < high:
            middle = (low + high) // 2
            found = ids[middle * 40 : middle * 40 + 40]
            if found == item:
                return True
            if found < item:
                low = middle + 1
            else:
                high = middle
        return False


class Listing(NamedTuple):
    """Each notes ref's name, its target and its notes, as `ReadCache.trees` keeps them."""

    refs: tuple[tuple[str, str, str], ...]

    def commits(self) -> set[str]:
        """Every annotated object."""
        return {flat[at : at + 40] for *_, flat in self.refs for at in range(0, len(flat), 80)}


def _tree_of(found: tuple[str, bytes] | None) -> str | None:
    """The tree id a commit object names first."""
    if found is None or found[0] != "commit" or not found[1].startswith(b"tree "):
        return None
    tree = found[1][5:45].decode("ascii", "replace")
    return tree if len(tree) == 40 else None


def _pairs(flat: str) -> Iterator[tuple[str, str]]:
    """(annotated object, note blob) from the notes of a tree as `ReadCache.trees` keeps them."""
    return ((flat[at : at + 40], flat[at + 40 : at + 80]) for at in range(0, len(flat), 80))


def _run(joined: str, count: int, k: int) -> list[str]:
    """The k-th of `count` runs, as even as can be, of the object ids of a string of them."""
    total = len(joined) // 40
    start, end = total * k // count, total * (k + 1) // count
    return [joined[at : at + 40] for at in range(start * 40, end * 40, 40)]


def _ids(joined: str) -> Iterator[str]:
    """The object ids of a string of them end to end."""
    return (joined[at : at + 40] for at in range(0, len(joined), 40))


def _unsent(count: int, remote: str, reason: str) -> str:
    return (
        f"{count} note object(s) are missing from this partial clone and {remote} did "
        f"not send them ({reason}); check that {remote} is reachable, then run "
        f"majordomus fetch {remote}."
    )


@contextlib.contextmanager
def _uncached() -> Iterator[None]:
    """libgit2 without its object cache: a walk of every notes tree reads each tree once,
    and at 100,000 notes (65,536 small fanned-out trees) the cache would keep ~40 MiB of
    them for nothing."""
    import pygit2

    pygit2.settings.enable_caching(False)
    try:
        yield
    finally:
        pygit2.settings.enable_caching(True)


def _entry(blobs: NoteBlobs, blob: str, *, keep: bool = True) -> BlobEntry | None:
    """What the read cache keeps of a note blob; None when the blob is not here. `keep`:
    `blobs` keeps the parse for a second look (see `NoteBlobs.parse`)."""
    return _entry_of(blobs.parse(blob, keep=keep))


def _newest(on: NotesOn) -> float:
    """The date of the newest record of a commit's notes (the order a history shows them)."""
    summaries = on.summaries
    if len(summaries) == 1:  # most notes
        return summaries[0].at
    return max((summary.at for summary in summaries), default=float("-inf"))


def _entry_of(parsed: Note | NoteError) -> BlobEntry | None:
    if isinstance(parsed, MissingObjectError):
        return None
    if isinstance(parsed, NoteError):
        return str(parsed)
    united = union([parsed])  # summarised as `note` presents it: records de-duplicated by id
    return summarise(united), united.invalid


# A first read of many notes (a fresh clone, a large fetch) parses them on every CPU: the
# process forks helpers that each open the repository, parse a run of the blobs and send
# back what the read cache keeps, marshalled through a pipe in frames of FRAME_ENTRIES (so
# that neither side holds the whole share twice). Below this many, one process is quicker
# than forking.
SHARED_READ_MIN = 2000
SHARED_READ_MAX = 8  # processes
FRAME_ENTRIES = 2000
SHARE_RUN = 8192  # notes a helper reads before it unmaps the objects


def _summarised_in_workers(
    gitdir: str,
    ids: str,
    put: Callable[[str, BlobEntry], None] | None,
    put_form: Callable[[str, bytes], None] | None = None,
    shown: Shown | None = None,
) -> None:
    """`put` the entry of each blob parsed by forked processes, one run of the ids each
    (None: the read cache holds them), and `put_form` the note of each that is `shown`,
    as the document cache keeps it; what
    they did not send the caller parses. This process parses nothing meanwhile, so
    the pack index and the parses are only ever in the helpers, never beside what it
    gathers. Nothing when only one CPU is there, when this process runs threads (forking
    one is unsafe), or where fork is not."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    count = min(cpus, SHARED_READ_MAX, len(ids) // 40 // (SHARED_READ_MIN // 2))
    if count < 2 or not hasattr(os, "fork") or threading.active_count() > 1:
        return
    children: list[tuple[int, BinaryIO]] = []  # not yet waited for
    try:
        for k in range(count):
            try:
                reader, writer = os.pipe()
            except OSError:  # no file descriptors left: the caller parses the rest
                break
            try:
                pid = os.fork()
            except OSError:  # no process to be had (a limit): likewise
                os.close(reader)
                os.close(writer)
                break
            if pid == 0:  # pragma: no cover (the child's coverage is not collected)
                os.close(reader)
                _parse_share(gitdir, _run(ids, count, k), writer, shown)
            os.close(writer)
            children.append((pid, os.fdopen(reader, "rb")))
        while children:
            pid, pipe = children[0]
            with pipe, contextlib.suppress(ValueError, EOFError, TypeError):
                for entries in frames_of(pipe):  # each whole frame holds entries as parsed
                    for blob, (value, form) in entries.items():
                        if put is not None:
                            put(blob, blob_entry(value))
                        if put_form is not None and form is not None:
                            put_form(blob, form)
            os.waitpid(pid, 0)
            children.pop(0)
    finally:
        for pid, pipe in children:  # interrupted: the helpers are of no use any more
            pipe.close()
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _parsed(
    blobs: NoteBlobs, share: Sequence[str]
) -> Iterator[tuple[str, BlobEntry, Note | NoteError]]:
    """The entry of each blob of a share that is here, with the parse it was made of (read
    by one git process a batch at a time while libgit2 is not loaded, else by libgit2
    one by one)."""
    for start in range(0, len(share), FRAME_ENTRIES):
        batch = share[start : start + FRAME_ENTRIES]
        blobs.prefetch(batch)
        for blob in batch:
            parsed = blobs.parse(blob, keep=False)
            entry = _entry_of(parsed)
            if entry is not None:
                yield blob, entry, parsed


def _parse_share(gitdir: str, share: Sequence[str], writer: int, shown: Shown | None) -> NoReturn:
    """In a forked child: parse a share of the blobs, write the entries in frames, exit;
    each with its note as the document cache keeps it when the note is `shown` (else None).
    The frames are written at the end, so a helper never stops parsing to wait while the
    parent reads another helper's pipe; until then they wait in an unnamed file (else in
    memory, marshalled). The share is read a run of SHARE_RUN notes at a time, the
    objects unmapped after each: the blob ids are in order, so each run reads only its
    part of the pack index, and the packs' pages it read leave this process."""
    import pygit2

    code = 1
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        repo = pygit2.Repository(gitdir)
        with unnamed_file() as waiting:
            for start in range(0, len(share), SHARE_RUN):
                entries = {}
                for blob, entry, parsed in _parsed(
                    NoteBlobs(lambda: repo), share[start : start + SHARE_RUN]
                ):
                    form = None
                    if shown is not None and isinstance(parsed, Note) and shown(parsed):
                        form = DocumentCache.form(parsed)
                    entries[blob] = (plain_entry(entry), form)
                    if len(entries) == FRAME_ENTRIES:
                        waiting.writelines(framed(entries))
                        entries = {}
                if entries:
                    waiting.writelines(framed(entries))
                repo.free()
            waiting.seek(0)
            with os.fdopen(writer, "wb") as pipe:
                shutil.copyfileobj(waiting, pipe)
        code = 0
    finally:
        os._exit(code)
