"""Real signing keys for tests: ssh keys made by ssh-keygen, an openpgp keyring made by gpg
in a throwaway GNUPGHOME, and git configured to sign with them. Nothing is mocked."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from tests.support.repo import Repo

HAVE_SSH = shutil.which("ssh-keygen") is not None
HAVE_GPG = shutil.which("gpg") is not None


class SshKey(NamedTuple):
    private: Path
    public: Path

    @property
    def line(self) -> str:
        """The public key as an allowed-signers line takes it: `type base64`."""
        return " ".join(self.public.read_text().split()[:2])


def ssh_key(folder: Path, name: str, kind: str = "ed25519") -> SshKey:
    """A new ssh key without a passphrase (`kind`: ed25519, ecdsa or rsa)."""
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / name
    bits = ["-b", "2048"] if kind == "rsa" else []
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, *bits, "-N", "", "-C", name, "-f", str(private)],
        check=True,
        capture_output=True,
    )
    return SshKey(private, private.with_name(name + ".pub"))


def allowed_signers(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def sign_with_ssh(repo: Repo, key: SshKey, allowed: Path | None = None) -> None:
    """This clone signs its records with `key` (as `git commit -S` would), and trusts
    the allowed-signers file `allowed`."""
    repo.git("config", "gpg.format", "ssh")
    repo.git("config", "user.signingKey", str(key.public))
    repo.git("config", "majordomus.sign", "true")
    if allowed is not None:
        repo.git("config", "gpg.ssh.allowedSignersFile", str(allowed))


def trust_file(repo: Repo, allowed: Path) -> None:
    repo.git("config", "gpg.ssh.allowedSignersFile", str(allowed))


def gpg_home(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    return folder


def gpg(home: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "", *args],
        env={"GNUPGHOME": str(home), "PATH": "/usr/bin:/bin"},
        input=stdin,
        capture_output=True,
        check=False,
    )


def gpg_key(home: Path, uid: str, expire: str = "1y") -> str:
    """A new ed25519 signing key for `uid` in the keyring at `home`; its fingerprint."""
    made = gpg(home, "--quick-gen-key", uid, "ed25519", "sign", expire)
    assert made.returncode == 0, made.stderr
    listed = gpg(home, "--with-colons", "--list-keys", uid).stdout.decode()
    return next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))


def gpg_environ(environ: Mapping[str, str], home: Path) -> dict[str, str]:
    return {**environ, "GNUPGHOME": str(home)}
