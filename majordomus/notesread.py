"""Reading notes: every note of the notes refs read in one pass, through the read cache
(many parsed by helper processes); the notes a command shows whole, through the document
cache.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from majordomus import gitobjects, helperparse, listings, notestree
from majordomus.blobs import NoteBlobs
from majordomus.cachefile import FILES as CACHE_FILES
from majordomus.cachefile import READ_FILE_NAME as CACHE_FILE
from majordomus.cachefile import RECORDS_FILE_NAME as DOCUMENTS_FILE
from majordomus.cachefile import VIEWS_FOLDER_NAME
from majordomus.documentcache import DocumentCache
from majordomus.errors import RepositoryError
from majordomus.notes import Note, Shown, could_hold_task, every_note
from majordomus.notetoml import MissingObjectError
from majordomus.objectids import BlobIds, ids, pairs
from majordomus.partialclone import NOT_ASKED, PartialClone, unsent_objects
from majordomus.readcache import BlobEntry, ReadCache
from majordomus.readrefs import ReadRefs
from majordomus.summaries import (
    FRAME_ENTRIES,
    Found,
    Listing,
    by_commit,
    newest,
    parsed,
    parsed_entry,
    united,
)
from majordomus.values import NoteSet, NotesOn, UnreadableNote

if TYPE_CHECKING:
    import pygit2

    from majordomus.repository import Repository
    from majordomus.searchcache import NoteSearched


class NotesReader:
    """The notes of one repository, for reading."""

    def __init__(self, repository: Repository) -> None:
        """Until libgit2 is loaded, a plain layout's refs and the few objects a read the
        cache answers needs are read by git (see `Repository.objects_by_git`)."""
        self.repository = repository
        self.refs = ReadRefs(repository)
        self.partial = PartialClone(repository)
        self.shown = ShownNotes(repository)
        self.blobs = NoteBlobs(
            lambda: repository.repo, repository.objects_by_git, self.shown.stored
        )
        self._disk_cache: ReadCache | None = None
        self._current_blobs: Collection[str] = ()  # of the last read of every note
        # Blob -> what a search keeps of its records, for the notes a read of every note
        # asked for it (`read_notes(search=True)`) had helpers parse.
        self.searched: dict[str, NoteSearched] = {}

    def read_notes(self, *, shown: Shown | None = None, search: bool | None = None) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache).
        `shown`: which notes the caller goes on to show whole (`preload`): a read that
        parses the notes keeps those for the document cache as it parses them. `search`:
        unless None, the caller searches every record next: a read whose helpers parse
        the notes keeps what a search keeps of each (`searched`; their records' JSON texts
        too when it is true).

        In a partial clone, note objects the clone left out are fetched from the
        promisor remote in one batch (`PartialClone.fetch`), then read; when they cannot
        be, the read stops (exit 3) rather than answer from what happens to be here.
        """
        noteset, missing = self._read_present(shown, search)
        if not missing or not self.partial.is_partial():
            return noteset
        remote, reason = NOT_ASKED
        asked: set[str] = set()
        # One batch brings each tree with everything under it; a second round is
        # only for objects the first could not name (under a tree that was missing).
        while self.partial.fetch is not None and missing - asked:
            asked |= missing
            remote, reason = self.partial.asked(sorted(missing))
            noteset, missing = self._read_present(shown, search)
        if missing:
            raise RepositoryError(unsent_objects(len(missing), remote, reason))
        return noteset

    def _read_present(self, shown: Shown | None, search: bool | None) -> tuple[NoteSet, set[str]]:
        """The notes whose objects are here, and the ids of the note objects that are not.

        A missing object is never cached: it can arrive with the next fetch.
        """
        cache = self._read_cache()
        unreadable: list[UnreadableNote] = []
        missing: set[str] = set()
        listed, walked = self._listed(cache, unreadable, missing)
        targets = {name: target for name, target, _, _ in listed}
        trees = [tree_id for _, _, tree_id, _ in listed]
        self._summarise(cache, [flat for *_, flat in listed], walked, shown, search)
        found, first = by_commit([(name, flat) for name, _, _, flat in listed])
        del listed
        commits = self._united_notes(cache, found, first, unreadable, missing)
        self._current_blobs = BlobIds(
            blob for held in found.values() for blob in ((held,) if isinstance(held, str) else held)
        )
        saved = cache.save(trees, self._current_blobs)
        self.shown.read_whole(self._current_blobs, commits)
        if len(found) >= helperparse.SHARED_READ_MIN:
            if walked:
                self.repository.repo.free()  # mapped again by what the helpers did not send
            if saved and not missing:
                self._disk_cache = None  # loaded again if this command reads once more
        del found
        return NoteSet(commits, tuple(unreadable), targets, len(missing)), missing

    def _listed(
        self, cache: ReadCache, unreadable: list[UnreadableNote], missing: set[str]
    ) -> tuple[list[tuple[str, str, str, str]], bool]:
        """Each notes ref, its target, its tree's id and the notes that tree holds (as
        `cache.trees` has them): listed by the read cache, else by git, else walked (see
        `_walked`); and whether a tree was walked. Each entry that is no note is added to
        `unreadable` once over every ref (as a note blob is): the first ref holding it
        names it."""
        listed: list[tuple[str, str, str, str]] = []
        walked = False
        odd: set[tuple[str, str, str]] = set()
        for name, target, tree_id in self.refs.trees():
            flat = cache.trees.get(tree_id)
            if flat is None:
                flat = self.repository.tree_notes_by_git(tree_id)  # by git: no object mapped here
                if flat is not None:
                    cache.put_tree(tree_id, flat)
            if flat is None:
                walked = True
                flat, entries = self._walked(cache, name, tree_id, unreadable, missing)
            else:
                entries = tuple(map(notestree.OddEntry._make, cache.odd.get(tree_id, ())))
            for no_note in entries:
                # One object at two paths of one commit (flat, fanned out) is one entry,
                # as one blob there is one note (`notes_on` counts them so).
                key = (no_note.commit or no_note.path, no_note.kind, no_note.oid)
                if key not in odd:
                    odd.add(key)
                    unreadable.append(UnreadableNote(no_note.commit, name, no_note.reason))
            listed.append((name, target, tree_id, flat))
        return listed, walked

    def _walked(
        self,
        cache: ReadCache,
        name: str,
        tree_id: str,
        unreadable: list[UnreadableNote],
        missing: set[str],
    ) -> tuple[str, Sequence[notestree.OddEntry]]:
        """The notes of a ref's tree, walked, and its entries that are no note; kept in the
        read cache unless a subtree is missing (added to `missing`, and to `unreadable`)."""
        lacking: set[str] = set()
        found_odd: list[notestree.OddEntry] = []
        with _uncached():
            walk = notestree.walk_present(self.repository.repo, tree_id, lacking, found_odd)
            flat = "".join(commit + blob for commit, blob in walk)
        if lacking:
            missing |= lacking
            for object_id in sorted(lacking):
                reason = f"notes tree {object_id[:12]} is missing; not read"
                unreadable.append(UnreadableNote("", name, reason))
        else:
            cache.put_tree(tree_id, flat, found_odd)
        return flat, found_odd

    def _summarise(
        self,
        cache: ReadCache,
        flats: Sequence[str],
        walked: bool,
        shown: Shown | None,
        search: bool | None,
    ) -> None:
        """Every note blob of these listings the read cache lacks summarised into it: many
        by helper processes (`helperparse`; unless `search` is None, what a search keeps
        of each kept in `searched`), a few read in one go and parsed as asked."""
        # The blobs to parse, each once, in order, as one string: the helpers forked to
        # parse them start from this process as it is now, so it holds no object per note
        # yet; and a helper given a run of ids in order reads only its part of the pack
        # index (it is ordered by id), not all of it.
        unread = "".join(
            sorted({blob for flat in flats for _, blob in pairs(flat) if blob not in cache.blobs})
        )
        if len(unread) // 40 >= helperparse.SHARED_READ_MIN:
            repo = self.repository.repo
            if walked:
                # The walk mapped the pack index (~130 MiB resident at 1,000,000 commits):
                # unmapped before the helpers are forked, it is in none of the processes
                # at once with what each of them builds.
                repo.free()
            put_forms = None if shown is None else self.shown.opened().put_forms
            put_searched = None if search is None else self.searched.__setitem__
            texts = bool(search)
            helperparse.summarised(
                str(repo.path), unread, cache.put_plain, put_forms, shown, put_searched, texts
            )
            # What no helper sent (none could be had, or one died), read in batches here.
            left = [blob for blob in ids(unread) if blob not in cache.blobs]
            for blob, summarised, _ in parsed(self.blobs, left):
                cache.put_blob(blob, summarised)
        elif unread:
            self.blobs.prefetch(list(ids(unread)))

    def _united_notes(
        self,
        cache: ReadCache,
        found: Found,
        first: str,
        unreadable: list[UnreadableNote],
        missing: set[str],
    ) -> dict[str, NotesOn]:
        """Each commit's notes of `found` as one (see `united`), from the read cache."""
        commits: dict[str, NotesOn] = {}
        known = cache.blobs
        entry_of = self._cached_entry
        for commit, held in found.items():
            if isinstance(held, str):  # the usual commit: one note, its summary cached
                entry = known.get(held)
                if entry is not None and not isinstance(entry, str):
                    commits[commit] = NotesOn((held,), entry[0], entry[1])
                    continue
            notes = {held: first} if isinstance(held, str) else held
            on = united(self.blobs, commit, notes, entry_of, unreadable, missing)
            if on is not None:
                commits[commit] = on
        return commits

    def _read_cache(self) -> ReadCache:
        if self._disk_cache is None:
            self._disk_cache = ReadCache(self.repository.commondir / CACHE_FILE)
        return self._disk_cache

    def drop_cache(self) -> bool:
        """Remove every derived cache file; the next command rebuilds what it needs."""
        commondir = self.repository.commondir
        dropped = False
        for name in CACHE_FILES:
            with contextlib.suppress(FileNotFoundError):
                (commondir / name).unlink()
                dropped = True
        folder = commondir / VIEWS_FOLDER_NAME
        if folder.is_dir():
            import shutil  # here: only `doctor --drop-cache` removes a folder

            shutil.rmtree(folder, ignore_errors=True)
            dropped = True
        self._disk_cache = self.shown.cache = None
        return dropped

    def _cached_entry(self, blob: str) -> BlobEntry | None:
        """A note's summaries (or why it is unreadable) from the read cache, or parsed and
        kept there; None when its blob is not here."""
        cache = self._read_cache()
        entry = cache.blobs.get(blob)
        if entry is None:
            entry = parsed_entry(self.blobs, blob)
            if entry is not None:
                cache.put_blob(blob, entry)
        return entry

    def listing(self) -> Listing | None:
        """The notes of every notes ref as the trees list them (no note read), from the
        listings the read cache keeps or git gives; None when a tree is listed by neither
        (`read_notes` walks it)."""
        cache = self._read_cache()
        found: list[tuple[str, str, str]] = []
        for name, target, tree_id in self.refs.trees():
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
        held = listings.held_notes(listing, commits)
        self.blobs.prefetch([blob for notes in held.values() for blob in notes])
        return listings.united_held(self.blobs, listing, held)

    def task_notes(self, prefix: str) -> NoteSet | None:
        """The notes that could hold a record of a task whose id starts with `prefix`, read
        as `read_notes` reads them: a first read of one task parses those, not every note.
        One `git grep` over the notes trees picks them (`could_hold_task`). Of the notes it
        picked only for a resume, those that may name a handover of the tasks are read too,
        and then those that may hold a copy of a resume read (`may_name`): the copy a read
        lists may name another handover. `invalid` counts the unreadable parts among the
        notes read. None where git cannot pick them: not a plain layout, a clone that may be
        partial (git would fetch each blob it lacks alone), a tree git cannot list or read."""
        repository = self.repository
        if repository.refs is None or self.partial.may_be_partial():
            return None
        listing = self.listing()
        if listing is None:
            return None
        picked = gitobjects.notes_matching(
            str(repository.gitdir),
            repository.environ,
            [tree_id for _, _, tree_id in self.refs.trees()],
            could_hold_task(prefix),
        )
        if picked is None:
            return None
        held = listings.held_notes(listing, picked)
        self.blobs.prefetch([blob for notes in held.values() for blob in notes])
        return listings.of_task(self.blobs, listing, held, prefix)

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process). A blob a read
        cache summarised that is not here any more is fetched first (`fetch_lost`)."""
        try:
            return self.blobs.note(blobs)
        except MissingObjectError as error:  # exit 3 unless all are here now
            self.partial.fetch_lost(error.object_id, blobs, self._current_blobs)
            return self.blobs.note(blobs)

    def note_copies(self, tree: pygit2.Tree | None) -> dict[str, list[str]]:
        """Annotated object -> the blob ids of its notes (more than one only in a damaged tree)."""
        copies: dict[str, list[str]] = {}
        if tree is None:
            return copies
        flat = self._read_cache().trees.get(str(tree.id))
        walk = notestree.walk(self.repository.repo, tree) if flat is None else pairs(flat)
        for commit, blob_id in walk:
            copies.setdefault(commit, []).append(blob_id)
        return copies


class ShownNotes:
    """The notes a command shows whole, through the document cache (decoding beats parsing
    TOML): made to hold them all before they are shown (`preload`), then read from it."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self.cache: DocumentCache | None = None  # opened once a command asks for it
        # The note blobs of every notes ref, once a read read them all: what the document
        # cache is pruned to when it is saved (else it is kept whole).
        self.current: Collection[str] = ()

    def opened(self) -> DocumentCache:
        if self.cache is None:
            self.cache = DocumentCache(self.repository.commondir / DOCUMENTS_FILE)
        return self.cache

    def stored(self, blob: str) -> Note | None:
        """A note as the document cache holds it, once a command asked for it (`preload`)."""
        return None if self.cache is None else self.cache.get(blob)

    def preload(
        self, note_blobs: NoteBlobs, blobs: Collection[str], order: Iterable[str] = ()
    ) -> None:
        """Before many notes are shown whole: the document cache made to hold them all,
        so that each is read from it when shown. Notes this command parsed already
        (`note_blobs` holds them: a read without its read cache) go into it as they are,
        for the next command. Many notes it lacks (every task shown after one task's first
        read) are parsed by helper processes, as a first read's are. The others are read
        by one git process (in a plain layout, so never a partial clone) even when libgit2
        is loaded: a few thousand notes read by libgit2 map most of the pack index into
        this process (~130 MiB resident at 1,000,000 commits), and git's process ends with
        the read. Past PRELOAD_BY_GIT_MAX notes, libgit2 reads them (quicker, and the
        records shown outweigh the index). The notes kept anew are written in the `order`
        given (iterated only then), those it leaves out after."""
        documents = self.opened()
        unread = [b for b in blobs if not documents.has(b)]
        fresh = sorted(b for b in unread if not note_blobs.is_parsed(b))
        if len(fresh) >= helperparse.SHARED_READ_MIN:
            commondir = str(self.repository.commondir)
            helperparse.summarised(commondir, "".join(fresh), None, documents.put_forms, every_note)
            unread = [b for b in unread if not documents.has(b)]
        del fresh
        by_git = 1 < sum(1 for b in unread if not note_blobs.is_parsed(b)) <= PRELOAD_BY_GIT_MAX
        for start in range(0, len(unread), FRAME_ENTRIES):  # a batch's bytes at a time
            batch = unread[start : start + FRAME_ENTRIES]
            left = [b for b in batch if not note_blobs.is_parsed(b)]
            if left and by_git and self.repository.refs is not None:
                note_blobs.prefetch(left, self.repository.shown_by_git(left))
            else:
                note_blobs.prefetch(left)  # by git while libgit2 is not loaded
            for blob in batch:
                parsed = note_blobs.parse(blob)
                if isinstance(parsed, Note):
                    documents.put(blob, parsed)
            # Kept here only what the cache does not keep (a note salvaged, unreadable).
            note_blobs.forget(filter(documents.has, batch))
        # Pruned to the current notes when this command read them all; else kept whole
        # (the notes shown are not all the notes there are).
        documents.save(self.current or None, order)

    def load(self, note_blobs: NoteBlobs, blobs: Iterable[str]) -> None:
        """The notes of these blobs the document cache holds, read from it in one go into
        `note_blobs` (a part of the records shown, about to be located; `forget` there
        lets them go)."""
        if self.cache is not None:
            for blob, note in self.cache.get_many(blobs):
                note_blobs.remember(blob, note)

    def texts(self, blobs: Iterable[str]) -> dict[str, tuple[str | None, ...]]:
        """The texts of the records of these blobs the document cache holds (see
        DocumentCache.texts_many), read from it in one go."""
        return {} if self.cache is None else dict(self.cache.texts_many(blobs))

    def read_whole(self, current: Collection[str], commits: Mapping[str, NotesOn]) -> None:
        """After a read of every note, whose blobs are `current`: the notes the helpers
        sent whole out of memory, saved newest first (the order a history shows them)."""
        self.current = current
        if self.cache is not None:
            put = self.cache.put_blobs
            kept = [on for on in commits.values() if on.blobs[0] in put]  # one task's, often
            kept.sort(key=newest, reverse=True)
            self.cache.save(current, (b for on in kept for b in on.blobs))


# Notes a command shows whole that git reads for it rather than libgit2: git takes ~25 us a
# note against libgit2's ~10, and spares this process the pack index (see `preload`).
PRELOAD_BY_GIT_MAX = 16384


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
