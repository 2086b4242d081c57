"""The verbs that look at the set-up: `doctor` (configuration, identity, lock files, invalid
notes, a shallow or partial clone, the agents' hooks) and `profile` (the effective
profile); each a function that returns what it found, and the command that prints it
(`<verb>_command`)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from majordomus import profile as profiles
from majordomus import remote
from majordomus.errors import ExitCode, RefusedError, RepositoryError
from majordomus.index import Index
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.plaintext import one_line
from majordomus.tasks import Jobs, missing_note_objects, open_here
from majordomus.values import Finding, NoteSet

if TYPE_CHECKING:
    from majordomus import reports
    from majordomus.signconfig import SignConfig
else:
    reports = OnFirstUse("majordomus.reports")


def doctor(inputs: Inputs, drop_cache: bool = False) -> list[Finding]:
    from majordomus import agentfindings  # one command uses it: not loaded by the others

    jobs = open_here(inputs)
    findings = _setup_findings(inputs, jobs, drop_cache)
    # Before the read, which fetches what a partial clone lacks: what is missing now.
    clone = _clone_findings(jobs)
    agent = [
        Finding("agent", found.healthy, found.detail, note=found.note)
        for found in agentfindings.findings(jobs.repository.workdir, inputs.environ)
    ]
    try:
        noteset = jobs.reader.read_notes()
    except RepositoryError as error:  # e.g. note objects a partial clone cannot fetch now
        findings.append(Finding("notes", False, error.message.rstrip(".")))
        return [*findings, *agent, *clone]
    findings += _invalid_findings(jobs, noteset)
    findings += _signature_findings(jobs, noteset)
    findings.extend(agent)
    # A record on several commits (a rewrite or adopt copied it) is one record.
    copies = sum(len(a.summaries) for a in noteset.commits.values())
    records = len({s.id for a in noteset.commits.values() for s in a.summaries})
    with_notes = set(noteset.commits) | {bad.commit for bad in noteset.unreadable if bad.commit}
    more = f" (and {copies - records} more copies on other commits)" if copies > records else ""
    findings.append(
        Finding(
            "notes",
            noteset.invalid == 0,
            f"{len(with_notes)} notes, {records} records{more}, {noteset.invalid} invalid",
        )
    )
    findings.extend(clone)
    return findings


BAD_NAMED = 10  # records with a bad signature named one by one; more are counted


def _signature_findings(jobs: Jobs, noteset: NoteSet) -> list[Finding]:
    """Whether this clone signs (key, program), where its trust configuration is, and
    what the records' signatures say, every record counted once."""
    trust = jobs.verifier.trust
    config = trust.config
    findings = [_signing_finding(config)]
    allowed = trust.allowed
    if allowed is None:
        ssh = "ssh: gpg.ssh.allowedSignersFile not set"
        healthy = True
    else:
        healthy = allowed.is_file()
        ssh = f"ssh: allowed signers {one_line(str(allowed))}" + (
            "" if healthy else " (no such file: nothing signed with ssh can verify)"
        )
    home = config.environ.get("GNUPGHOME") or "~/.gnupg"
    gpg = f"openpgp: {one_line(trust.gpg_program)}'s keyring ({one_line(home)})"
    findings.append(Finding("trust", healthy, f"{ssh}; {gpg}"))
    index = Index(noteset, jobs.reader, jobs.history)
    located = []
    for item in index.records:
        try:
            located.append(index.locate(item))
        except RepositoryError:  # a note object lost since it was read: a finding of its own
            continue
    attached = jobs.attach(located)
    counts = dict.fromkeys(("verified", "unsigned", "bad", "unknown-key"), 0)
    for loc in attached:
        counts[loc.signed.status] += 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    findings.append(Finding("signed", counts["bad"] == 0, summary))
    bad = [loc for loc in attached if loc.signed.status == "bad"]
    for loc in bad[:BAD_NAMED]:
        signer = loc.signed.signer
        by = f", signed by {one_line(signer)}" if signer else ""
        findings.append(
            Finding(
                "signed",
                False,
                f"{loc.record.kind} {loc.record.id} on {loc.commit[:12]}: BAD SIGNATURE for "
                f"author {one_line(loc.record.author)}{by}",
            )
        )
    if len(bad) > BAD_NAMED:
        findings.append(
            Finding("signed", False, f"{len(bad) - BAD_NAMED} more with a bad signature")
        )
    return findings


def _signing_finding(config: SignConfig) -> Finding:
    if not config.signs:
        return Finding(
            "signing",
            True,
            "not signing records (majordomus.sign true signs them with git's signing key)",
        )
    fmt = config.format
    program = config.program(fmt)
    key = config.get("user.signingKey") or (
        config.get("gpg.ssh.defaultKeyCommand") if fmt == "ssh" else "the committer's identity"
    )
    problems = []
    if fmt not in ("ssh", "openpgp"):
        problems.append(f"gpg.format {fmt} cannot sign records (ssh and openpgp only)")
    if not key:
        problems.append("no signing key: git config user.signingKey ~/.ssh/id_ed25519.pub")
    if shutil.which(program) is None:
        problems.append(f"the program {program} is not found")
    detail = (
        f"records are signed ({config.sign_source}): {one_line(fmt)}, key "
        f"{one_line(key or 'none')}, program {one_line(program)}"
    )
    if problems:
        detail += "; every write is refused until this is fixed: " + "; ".join(problems)
    return Finding("signing", not problems, detail)


def _setup_findings(inputs: Inputs, jobs: Jobs, drop_cache: bool) -> list[Finding]:
    """The read caches (dropped first with `drop_cache`), the profile, the identity, what
    `init` sets up, and the lock files."""
    findings: list[Finding] = []
    if drop_cache:
        dropped = jobs.reader.drop_cache()
        findings.append(
            Finding("cache", True, "read caches dropped" if dropped else "no read caches to drop")
        )
    try:
        prof = jobs.profile
        findings.append(Finding("profile", True, f"{prof.name} ({_profile_line(prof)})"))
    except RefusedError as error:
        findings.append(Finding("profile", False, error.message))
    # A clone without a git identity cannot write records: it reads them (a CI clone, a
    # reviewer's). What only writing needs is a note there, not a fault.
    reader = False
    try:
        findings.append(Finding("identity", True, jobs.repository.identity()))
    except RepositoryError as error:
        reader = True
        findings.append(Finding("identity", True, f"{_FOR_WRITING}{error.message}", note=True))
    findings.extend(_config_findings(jobs, reader))
    from majordomus.writer import Writer  # its lock files: the notes ref's writer tells

    locks = [
        Finding(
            "lock",
            False,
            f"{lock.path} is {lock.age_s} s old; if no git or majordomus "
            f"process is running, remove it (rm '{lock.path}').",
        )
        for lock in Writer(jobs.repository, jobs.reader, jobs.history).ref.stale_locks(
            older_than_s=0
        )
    ]
    findings.extend(locks or [Finding("locks", True, "no lock files")])
    return findings


def _invalid_findings(jobs: Jobs, noteset: NoteSet) -> list[Finding]:
    """The notes refs left out of the read, and each note that holds what is not a record."""
    skipped = jobs.reader.refs.skipped_refs()
    findings = [Finding("notes", False, why.rstrip(".")) for why in skipped]
    for bad in noteset.unreadable:
        where = f"note on {bad.commit[:12]} in {bad.ref}" if bad.commit else bad.ref
        findings.append(Finding("invalid", False, f"{where}: {bad.reason}"))
    for commit, annotated in sorted(noteset.commits.items()):
        if annotated.invalid:
            try:
                parts = len(jobs.reader.note(annotated.blobs).unreadable)
            except RepositoryError as error:  # its object lost since it was summarised
                findings.append(Finding("invalid", False, error.message.rstrip(".")))
                continue
            what = (
                [f"{annotated.invalid - parts} invalid record(s)"]
                if annotated.invalid > parts
                else []
            )
            if parts:
                what.append(
                    f"{parts} part{'s' if parts > 1 else ''} that "
                    f"{'are' if parts > 1 else 'is'} not TOML (written by hand?)"
                )
            findings.append(
                Finding(
                    "invalid",
                    False,
                    f"note on {commit[:12]}: {' and '.join(what)} skipped "
                    f"(see git notes --ref=majordomus show {commit[:12]})",
                )
            )
    return findings


def _clone_findings(jobs: Jobs) -> list[Finding]:
    """A shallow or partial clone, and what it limits. Informational: such a clone is
    what CI makes on purpose, and every answer it gives is exact or says it cannot be."""
    findings = []
    if jobs.history.is_shallow():
        cut = len(jobs.history.shallow_boundary())
        findings.append(
            Finding(
                "clone",
                True,
                f"shallow clone (history cut at {cut} commit{'s' if cut != 1 else ''} listed "
                "in .git/shallow): a label that depends on history past the cut is unknown, "
                "never guessed, and records on commits past it are not reachable from here; "
                "git fetch --unshallow gives exact answers",
            )
        )
    promisors: dict[str, str] = {}
    pattern = r"^remote\..*\.(promisor|partialclonefilter)$"
    listed = jobs.repository.git("config", "--get-regexp", pattern, check=False).stdout
    for line in listed.splitlines():
        key, _, value = line.partition(" ")
        name, _, setting = key.removeprefix("remote.").rpartition(".")
        if setting == "partialclonefilter":
            promisors[name] = value
        elif value.lower() in ("true", "yes", "on", "1"):
            promisors.setdefault(name, "")
    if not promisors:
        return findings
    missing = len(missing_note_objects(jobs))
    for name, filter_spec in sorted(promisors.items()):
        counted = f"; {missing} note objects are not here yet" if missing else ""
        findings.append(
            Finding(
                "clone",
                True,
                f"partial clone of {name} (filter {filter_spec or 'unknown'}): objects the "
                f"filter left out, note objects included, are not here until fetched{counted}; "
                f"majordomus fetch {name} brings every note object in one batch",
            )
        )
    return findings


_FOR_WRITING = "none, which reading records does not need; to write them: "


def _config_findings(jobs: Jobs, reader: bool) -> list[Finding]:
    """What `init` sets up: missing rewrite settings strand records on rebase (unhealthy,
    but a note in a clone that only reads: it writes no record to strand); a remote that
    plain `git fetch` does not bring records from is worth knowing."""
    rewrite = jobs.repository.git(
        "config", "--get-all", "notes.rewriteRef", check=False
    ).stdout.split()
    findings = []
    if "refs/notes/majordomus" not in rewrite:
        findings.append(
            Finding(
                "config",
                reader,
                ("not needed for reading; to write records: " if reader else "")
                + "notes.rewriteRef does not include refs/notes/majordomus: records will not "
                "follow amended or rebased commits (run majordomus init)",
                note=reader,
            )
        )
    for action in ("amend", "rebase"):
        value = jobs.repository.git("config", "--type=bool", f"notes.rewrite.{action}", check=False)
        if value.stdout.strip() == "false":
            findings.append(
                Finding(
                    "config",
                    False,
                    f"notes.rewrite.{action} is false: records will not follow git "
                    f"{'commit --amend' if action == 'amend' else 'rebase'} (git config "
                    f"--unset notes.rewrite.{action})",
                )
            )
    if not findings:
        findings.append(Finding("config", True, "records follow amended and rebased commits"))
    for name in jobs.repository.remote_names():
        specs = jobs.repository.git(
            "config", "--get-all", f"remote.{name}.fetch", check=False
        ).stdout
        if remote.fetch_refspec(name) not in specs.split():
            findings.append(
                Finding(
                    "config",
                    True,
                    f"plain git fetch does not bring {name}'s records (majordomus fetch {name} "
                    f"does; majordomus init --remote {name} makes git fetch do it too)",
                )
            )
    return findings


def _profile_line(prof: profiles.Profile) -> str:
    return (
        f"interval {prof.interval_s}s, checkpoint_max {prof.checkpoint_max}, "
        f"handover_max {prof.handover_max}"
    )


def profile_info(inputs: Inputs) -> profiles.Profile:
    jobs = open_here(inputs)
    return jobs.profile


def doctor_command(invocation: Invocation, drop_cache: bool = False, as_json: bool = False) -> int:
    findings = doctor(invocation.inputs(), drop_cache)
    invocation.out(reports.doctor(findings, as_json))
    healthy = all(finding.healthy for finding in findings)
    return ExitCode.OK if healthy else ExitCode.NEGATIVE


def profile_command(invocation: Invocation, as_json: bool = False) -> int:
    invocation.out(reports.profile(profile_info(invocation.inputs()), as_json))
    return ExitCode.OK
