"""Stores that hang a client: a socket on 127.0.0.1 that accepts and never answers, and an HTTP server.

Both listen on loopback only, on a port the kernel picks, and count the
connections they accepted, so a test can tell one try from several without
timing anything.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class Silent:
    """Accepts every connection, reads nothing, answers nothing, closes nothing until it is closed."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"silent-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                self._held.append(conn)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for conn in self._held:
                conn.close()

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _Quiet(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def http_server() -> Iterator[int]:
    """An HTTP server on 127.0.0.1 (it answers 400 or 501 to whatever it is sent); yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="http-server", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
