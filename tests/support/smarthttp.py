"""A real smart-HTTP git server for tests: Python's http.server running `git http-backend`
as CGI over the bare repositories in one folder, on 127.0.0.1, in a process of its own.

It can stop itself with SIGSTOP at a chosen point of a session (what a server that hangs
mid-way looks like to git): `upload` when a fetch asks for objects, `receive` when a
push sends them, `answer` after the headers and first bytes of an object answer.

    python -m tests.support.smarthttp ROOT [--stop upload|receive|answer]

prints the port it listens on, then serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

STOPS = ("upload", "receive", "answer")


def _objects_asked(path: str, body: bytes, encoding: str) -> str | None:
    """Which stop a request is: `upload` (a fetch's want list, protocol v0 or v2),
    `receive` (a push's commands and pack), None for any other (refs listed)."""
    if path.endswith("/git-receive-pack"):
        return "receive"
    if not path.endswith("/git-upload-pack"):
        return None
    if encoding == "gzip":
        body = gzip.decompress(body)
    return "upload" if b"command=fetch" in body or b"want " in body else None


def _split_cgi(output: bytes) -> tuple[bytes, bytes]:
    """A CGI answer's header block and body (the blank line may be CRLF or LF)."""
    ends = [(output.find(mark), mark) for mark in (b"\r\n\r\n", b"\n\n")]
    found = [(at, mark) for at, mark in ends if at >= 0]
    if not found:
        return output, b""
    at, mark = min(found)
    return output[:at], output[at + len(mark) :]


def _stop() -> None:
    """The whole server stopped by SIGSTOP. The signal stops the process a moment after
    kill() returns; this thread waits for ever meanwhile, so not one more byte leaves."""
    os.kill(os.getpid(), signal.SIGSTOP)
    threading.Event().wait()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # a test reads git's answer, not the server's log

    def do_GET(self) -> None:
        self._cgi(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b"".join(self._chunks())
        else:
            body = self.rfile.read(length)
        self._cgi(body)

    def _chunks(self) -> Iterator[bytes]:
        while size := int(self.rfile.readline().strip() or b"0", 16):
            yield self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()

    def _cgi(self, body: bytes) -> None:
        url = urlsplit(self.path)
        encoding = self.headers.get("Content-Encoding", "")
        asked = _objects_asked(url.path, body, encoding)
        if asked is not None and asked == self.server.stop:
            _stop()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.server.root),  # no configuration of the machine's
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "tester",  # lets http-backend accept pushes
            "REMOTE_ADDR": self.client_address[0],
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": encoding,
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, payload = _split_cgi(done.stdout)
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.server.stop == "answer" and asked == "upload":
            self.wfile.write(payload[:8])
            self.wfile.flush()
            _stop()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, stop: str | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.stop = stop


@dataclass(frozen=True, slots=True)
class Served:
    """A running server: its process and the URL of the folder it serves."""

    process: subprocess.Popen[str]
    url: str

    def stopped(self) -> bool:
        """Whether the server is stopped by a signal (state T in /proc)."""
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"


@contextlib.contextmanager
def serving(root: Path, stop: str | None = None) -> Iterator[Served]:
    """The server over `root`, killed (stopped or not) when the block ends."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.smarthttp",
            str(root),
            *(["--stop", stop] if stop else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield Served(process, f"http://127.0.0.1:{port}")
    finally:
        process.kill()  # SIGKILL ends a stopped process too
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--stop", choices=STOPS)
    options = parser.parse_args()
    server = _Server(options.root, options.stop)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
