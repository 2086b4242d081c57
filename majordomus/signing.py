"""A record signed as git signs a commit: the key, format and program git's configuration
names, a detached signature over the record's canonical bytes kept in its `sig`. Asked to
sign and unable, the write is refused: nothing is written unsigned."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

from majordomus.errors import RepositoryError
from majordomus.notes import canonical
from majordomus.plaintext import one_line
from majordomus.records import SIGNATURE_KEY, SIGNATURE_NAMESPACE, TEXT_CEILING, Record
from majordomus.signconfig import SignConfig, run

_NOTHING = "nothing was recorded"


def signed(record: Record, config: SignConfig, identity: str) -> Record:
    """`record` with its signature as the last key of its table."""
    fmt = config.format
    data = canonical(record.kind, record.table)
    if fmt == "ssh":
        signature = _ssh_sign(data, config)
    elif fmt == "openpgp":
        signature = _gpg_sign(data, config, identity)
    else:
        raise RepositoryError(
            f"gpg.format is {one_line(fmt)}, which majordomus cannot sign records with "
            f"(ssh and openpgp only): {_NOTHING}; set gpg.format or majordomus.sign false."
        )
    if len(signature) > TEXT_CEILING:
        raise RepositoryError(
            f"the signature is {len(signature)} characters, over the {TEXT_CEILING} a record "
            f"field may hold: {_NOTHING}; sign with a smaller key (ed25519, say)."
        )
    table = {**record.table, SIGNATURE_KEY: signature}
    return Record(record.kind, record.id, record.task, record.head, record.at, record.author, table)


def _ssh_sign(data: bytes, config: SignConfig) -> str:
    key = config.get("user.signingKey") or _default_key(config)
    if not key:
        raise RepositoryError(
            f"{config.sign_source} asks for signed records but git has no ssh signing key: "
            f"{_NOTHING}; set one with git config user.signingKey ~/.ssh/id_ed25519.pub."
        )
    program = config.program("ssh")
    with tempfile.TemporaryDirectory(prefix="majordomus-sign-") as scratch:
        literal = key.removeprefix("key::") if key.startswith(("key::", "ssh-")) else None
        if literal is not None:
            # A public key given whole: its private half is in ssh-agent.
            path = os.path.join(scratch, "key.pub")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(literal.strip() + "\n")
            argv = [program, "-Y", "sign", "-n", SIGNATURE_NAMESPACE, "-U", "-f", path]
        else:
            path = str(config.workdir / os.path.expanduser(key))
            argv = [program, "-Y", "sign", "-n", SIGNATURE_NAMESPACE, "-f", path]
        ran = run(argv, data, config.environ, config.timeout_s, cwd=config.workdir)
    return _answer(ran.code, ran.out, ran.err, ran.missing, program, config, "-----BEGIN SSH")


def _default_key(config: SignConfig) -> str | None:
    """`gpg.ssh.defaultKeyCommand`'s first key, as git takes it when no key is set."""
    command = config.get("gpg.ssh.defaultKeyCommand")
    if not command:
        return None
    ran = run(command.split(), b"", config.environ, config.timeout_s, cwd=config.workdir)
    if ran.code != 0:
        return None
    for line in ran.out.splitlines():
        if line.startswith(("key::", "ssh-")):
            return line.strip()
    return None


def _gpg_sign(data: bytes, config: SignConfig, identity: str) -> str:
    program = config.program("openpgp")
    key = config.get("user.signingKey") or identity
    argv = [program, "--status-fd=2", "-bsau", key]
    ran = run(argv, data, config.environ, config.timeout_s, cwd=config.workdir)
    if ran.code == 0 and "[GNUPG:] SIG_CREATED " not in ran.err:
        return _answer(1, "", ran.err, False, program, config, "")
    return _answer(ran.code, ran.out, ran.err, ran.missing, program, config, "-----BEGIN PGP")


def _answer(
    code: int | None,
    out: str,
    err: str,
    missing: bool,
    program: str,
    config: SignConfig,
    armour: str,
) -> str:
    if missing:
        raise RepositoryError(
            f"the signing program {one_line(program)} was not found: {_NOTHING}; install it, "
            "or name it with git config gpg.ssh.program (ssh) or gpg.program (openpgp)."
        )
    if code is None:
        raise RepositoryError(
            f"the signing program {one_line(program)} did not answer within "
            f"{config.timeout_s:g} seconds (a passphrase prompt?): {_NOTHING}; load the key "
            "into ssh-agent or gpg-agent first."
        )
    if code != 0 or not out.startswith(armour):
        why = _last_line(err.splitlines()) or f"exit {code}"
        raise RepositoryError(
            f"signing the record failed ({one_line(program)}: {one_line(why)}): {_NOTHING}; "
            "check user.signingKey, or set majordomus.sign false."
        )
    return out


def _last_line(lines: Sequence[str]) -> str:
    kept = [line for line in lines if line.strip() and not line.startswith("[GNUPG:]")]
    return kept[-1].strip() if kept else ""
