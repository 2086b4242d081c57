"""Who provably wrote a record: its signature checked against git's own trust
configuration, as `git verify-commit` checks a commit's (`gpg.ssh.allowedSignersFile` for
ssh, the gpg keyring for openpgp), the signer's identity held to the record's author.

Each answer is cached by the record's bytes and the trust configuration's content, so an
allowed-signers file changed is a new answer at once; the checks a read still needs run
side by side, one program each."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from majordomus.cachefile import SIGNATURES_FILE_NAME, CacheFile
from majordomus.notes import canonical
from majordomus.records import (
    SIGNATURE_KEY,
    SIGNATURE_NAMESPACE,
    Record,
    Signature,
    unsigned,
)
from majordomus.repository import Repository
from majordomus.signconfig import SignConfig, read, run
from majordomus.tuples import NamedTuple
from majordomus.values import AttachedRecord

SSH_ARMOUR = "-----BEGIN SSH SIGNATURE-----"
PGP_ARMOUR = "-----BEGIN PGP SIGNATURE-----"
VERIFY_TIMEOUT_S = 10.0
WORKERS = 8  # checks run side by side: each is a program waiting on a little I/O
_EMAIL = re.compile(r".*<([^<>]*)>\s*")
_PLAIN_EMAIL = re.compile(r"[^\s<>\x00-\x1f\x7f-\x9f]{1,254}")  # what may go on a command line
_GPG_LEVELS = ("undefined", "never", "marginal", "fully", "ultimate")
_GPG_FILES = ("pubring.kbx", "pubring.gpg", "trustdb.gpg")


def signature_of(record: Record) -> str | None:
    """The record's signature text, or None when it holds none. A `sig` that is not text
    is a signature that cannot verify (`bad`)."""
    value = record.table.get(SIGNATURE_KEY)
    if value is None:
        return None
    return value if isinstance(value, str) else ""


def author_email(author: str) -> str:
    """The email of `Name <email>`, or "" (no email, or one no principal could be)."""
    match = _EMAIL.fullmatch(author)
    email = match.group(1).strip() if match else ""
    return email if _PLAIN_EMAIL.fullmatch(email) else ""


class Check(NamedTuple):
    """What one signature check needs: the bytes signed, the signature, the author's email
    and when the record says it was written (a key is judged as of then, as git does)."""

    data: bytes
    sig: str
    email: str
    at: str  # YYYYMMDDHHMMSSZ

    @property
    def key(self) -> str:
        digest = hashlib.sha256(self.data + b"\0" + self.sig.encode("utf-8", "replace"))
        return digest.hexdigest()[:40]


def check_of(record: Record, sig: str) -> Check:
    at = record.at.strftime("%Y%m%d%H%M%SZ")
    return Check(canonical(record.kind, record.table), sig, author_email(record.author), at)


class SignatureCache(CacheFile):
    """The trust configuration's digest, and each check's answer under it."""

    FORMAT = "signatures:trust,{check:(status,signer)}"


class Trust(NamedTuple):
    """The trust configuration a check runs against, read once per command."""

    config: SignConfig
    allowed: Path | None
    revoked: Path | None
    ssh_program: str
    gpg_program: str
    min_level: str

    def digest(self) -> str:
        """What every cached answer depends on: the files' content (allowed signers,
        revocations), the keyring's files as they stand, the programs found."""
        parts: list[Any] = [
            self.ssh_program,
            shutil.which(self.ssh_program),
            self.gpg_program,
            shutil.which(self.gpg_program),
            self.min_level,
        ]
        for path in (self.allowed, self.revoked):
            parts.append(None if path is None else str(path))
            parts.append(_content(path))
        home = Path(self.config.environ.get("GNUPGHOME") or os.path.expanduser("~/.gnupg"))
        parts.append(str(home))
        for name in _GPG_FILES:
            try:
                stat = (home / name).stat()
                parts.append((stat.st_size, stat.st_mtime_ns, stat.st_ino))
            except OSError:
                parts.append(None)
        return hashlib.sha256(repr(parts).encode("utf-8", "replace")).hexdigest()


def _content(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def trust_of(config: SignConfig) -> Trust:
    return Trust(
        config=config,
        allowed=config.path("gpg.ssh.allowedSignersFile"),
        revoked=config.path("gpg.ssh.revocationFile"),
        ssh_program=config.program("ssh"),
        gpg_program=config.program("openpgp"),
        min_level=(config.get("gpg.minTrustLevel") or "undefined").lower(),
    )


class Verifier:
    """Signatures checked for one command: the trust configuration read when the first
    signed record is met, answers kept in the signature cache."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self._trust: Trust | None = None
        self._digest = ""
        self._cache: SignatureCache | None = None
        self._answers: dict[str, tuple[str, str | None]] | None = None

    @property
    def trust(self) -> Trust:
        if self._trust is None:
            self._trust = trust_of(read(self.repository))
        return self._trust

    def signatures(self, records: Sequence[Record], strict: bool = False) -> list[Signature]:
        """Each record's signature status; `strict`: read under `trust = "signed"`."""
        found = [signature_of(record) for record in records]
        if all(sig is None for sig in found):
            return [unsigned(strict)] * len(records)
        checks = {
            index: check_of(record, sig)
            for index, (record, sig) in enumerate(zip(records, found, strict=True))
            if sig is not None
        }
        answers = self._answered(checks.values())
        out = []
        for index in range(len(records)):
            check = checks.get(index)
            if check is None:
                out.append(unsigned(strict))
            else:
                status, signer = answers[check.key]
                out.append(Signature(status, signer, strict))
        return out

    def attach(self, locs: Sequence[AttachedRecord], strict: bool = False) -> list[AttachedRecord]:
        """The records with their signature status."""
        statuses = self.signatures([loc.record for loc in locs], strict)
        return [loc._replace(signature=sig) for loc, sig in zip(locs, statuses, strict=True)]

    def _answered(self, checks: Iterable[Check]) -> Mapping[str, tuple[str, str | None]]:
        answers = self._load()
        todo = {check.key: check for check in checks if check.key not in answers}
        if todo:
            trust = self.trust
            with ThreadPoolExecutor(max_workers=min(WORKERS, len(todo))) as pool:
                found = dict(
                    zip(todo, pool.map(lambda c: verify(c, trust), todo.values()), strict=True)
                )
            answers.update(found)
            assert self._cache is not None
            self._cache.write(self._digest, answers)
        return answers

    def _load(self) -> dict[str, tuple[str, str | None]]:
        if self._answers is None:
            self._digest = self.trust.digest()
            self._cache = SignatureCache(self.repository.commondir / SIGNATURES_FILE_NAME)
            loaded = self._cache.load()
            answers: dict[str, tuple[str, str | None]] = {}
            if loaded is not None and loaded[0] == self._digest and isinstance(loaded[1], dict):
                answers = loaded[1]
            self._answers = answers
        return self._answers


# ---- one check --------------------------------------------------------------------------


def verify(check: Check, trust: Trust) -> tuple[str, str | None]:
    """(status, signer) of one signature."""
    if check.sig.startswith(SSH_ARMOUR):
        if not is_sshsig(check.sig):
            return ("bad", None)  # not even shaped like one: no program is started for it
        return _verify_ssh(check, trust)
    if check.sig.startswith(PGP_ARMOUR):
        return _verify_gpg(check, trust)
    return ("bad", None)  # not a signature any program here reads


def is_sshsig(text: str) -> bool:
    """Whether `text` is an armoured ssh signature whose blob is shaped as one (the magic
    `SSHSIG`, version 1, namespace `majordomus`): a junk signature costs no process."""
    import base64
    import binascii

    lines = text.strip().splitlines()
    if len(lines) < 3 or lines[-1] != "-----END SSH SIGNATURE-----":
        return False
    try:
        blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return False
    if blob[:6] != b"SSHSIG" or blob[6:10] != b"\x00\x00\x00\x01":
        return False
    at = 10
    fields = []
    for _ in range(2):  # the public key, then the namespace
        if len(blob) < at + 4:
            return False
        size = int.from_bytes(blob[at : at + 4], "big")
        fields.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    return fields[1] == SIGNATURE_NAMESPACE.encode()


def _run(argv: Sequence[str], data: bytes, trust: Trust) -> tuple[int | None, str, bool]:
    ran = run(argv, data, trust.config.environ, VERIFY_TIMEOUT_S, cwd=trust.config.workdir)
    return ran.code, ran.out, ran.missing


def _verify_ssh(check: Check, trust: Trust) -> tuple[str, str | None]:
    program, allowed = trust.ssh_program, trust.allowed
    with tempfile.TemporaryDirectory(prefix="majordomus-verify-") as scratch:
        sig_file = os.path.join(scratch, "record.sig")
        with open(sig_file, "w", encoding="utf-8") as handle:
            handle.write(check.sig)
        time = f"-Overify-time={check.at}"
        revoked = ["-r", str(trust.revoked)] if trust.revoked is not None else []
        if allowed is not None and check.email:
            code, _, missing = _run(
                [
                    program,
                    "-Y",
                    "verify",
                    "-n",
                    SIGNATURE_NAMESPACE,
                    "-f",
                    str(allowed),
                    "-I",
                    check.email,
                    "-s",
                    sig_file,
                    time,
                    *revoked,
                ],
                check.data,
                trust,
            )
            if missing:
                return ("unknown-key", None)
            if code == 0:
                return ("verified", check.email)
        if allowed is not None:
            code, out, missing = _run(
                [program, "-Y", "find-principals", "-f", str(allowed), "-s", sig_file, time],
                b"",
                trust,
            )
            principals = [line.strip() for line in out.splitlines() if line.strip()]
            if code == 0 and principals:
                # A key the trust configuration names, for someone else (or a signature
                # that does not verify): not the author's.
                return ("bad", ",".join(principals))
        code, _, missing = _run(
            [program, "-Y", "check-novalidate", "-n", SIGNATURE_NAMESPACE, "-s", sig_file],
            check.data,
            trust,
        )
        if missing or code == 0:
            return ("unknown-key", None)
        return ("bad", None)


def _verify_gpg(check: Check, trust: Trust) -> tuple[str, str | None]:
    program = trust.gpg_program
    with tempfile.TemporaryDirectory(prefix="majordomus-verify-") as scratch:
        sig_file = os.path.join(scratch, "record.sig")
        with open(sig_file, "w", encoding="utf-8") as handle:
            handle.write(check.sig)
        _, out, missing = _run(
            [program, "--keyid-format=long", "--status-fd=1", "--verify", sig_file, "-"],
            check.data,
            trust,
        )
    if missing:
        return ("unknown-key", None)
    status: dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith("[GNUPG:] "):
            word, _, rest = line[9:].partition(" ")
            status.setdefault(word, rest)
    if "GOODSIG" not in status:
        if "ERRSIG" in status and "NO_PUBKEY" in status:
            return ("unknown-key", None)
        signer = _uid(status.get("EXPKEYSIG") or status.get("REVKEYSIG") or status.get("EXPSIG"))
        return ("bad", signer)
    signer = _uid(status["GOODSIG"])
    level = next((w[6:].lower() for w in status if w.startswith("TRUST_")), "undefined")
    if _rank(level) < _rank(trust.min_level):
        return ("bad", signer)
    if author_email(signer or "").lower() == check.email.lower() and check.email:
        return ("verified", signer)
    fingerprint = status.get("VALIDSIG", "").split(" ")[0]
    for uid in _uids(program, fingerprint, trust) if fingerprint else []:
        if author_email(uid).lower() == check.email.lower() and check.email:
            return ("verified", uid)
    return ("bad", signer)


def _uid(rest: str | None) -> str | None:
    """The user id of a GOODSIG-like status line's rest: `KEYID user id`."""
    if not rest:
        return None
    uid = rest.partition(" ")[2].strip()
    return uid or None


def _rank(level: str) -> int:
    return _GPG_LEVELS.index(level) if level in _GPG_LEVELS else 0


def _uids(program: str, fingerprint: str, trust: Trust) -> list[str]:
    code, out, _ = _run(
        [program, "--with-colons", "--fixed-list-mode", "--list-keys", fingerprint], b"", trust
    )
    if code != 0:
        return []
    uids = []
    for line in out.splitlines():
        fields = line.split(":")
        if fields[0] == "uid" and len(fields) > 9 and fields[1] not in ("r", "e"):
            uids.append(_colon_unescape(fields[9]))
    return uids


def _colon_unescape(text: str) -> str:
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)
