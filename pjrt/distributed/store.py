"""The key-value store the processes of a multi-process client meet through.

Every launcher provides one: jax.distributed's coordination service, torchrun's TCPStore,
or ``openhlo run --num-processes``, which uses ``TcpStore`` below. Processes use it only to
find each other (the topology exchange, the gloo connection addresses), never for tensor
data, so the interface is three calls:

* ``set(key, value)``: publish ``value`` (bytes) under ``key``;
* ``get(key, timeout_s)``: the value of ``key``, waiting until some process sets it;
  ``DeadlineExceededError`` naming the key and the store after ``timeout_s`` seconds;
* ``try_get(key)``: the value, or None at once.

Adapters for the other launchers implement the same three. ``PrefixStore`` gives each user
of a shared store its own key space.
"""
from __future__ import annotations

import abc
import socket
import socketserver
import struct
import threading
import time
from typing import Optional

from pjrt.errors import ArgumentError, DeadlineExceededError, UnavailableError

# Seconds a client waits to reach the store's server (a wrong address fails this fast).
CONNECT_TIMEOUT_S = 10.0


class KeyValueStore(abc.ABC):
    """Where the processes of one job publish and wait for small values (module doc)."""

    @abc.abstractmethod
    def set(self, key: str, value: bytes) -> None:
        """Publish ``value`` under ``key`` (replacing an earlier value)."""

    @abc.abstractmethod
    def get(self, key: str, timeout_s: float) -> bytes:
        """The value of ``key``, blocking until it is set; DeadlineExceededError after
        ``timeout_s`` seconds."""

    @abc.abstractmethod
    def try_get(self, key: str) -> Optional[bytes]:
        """The value of ``key``, or None when it is not set (never blocks)."""


class PrefixStore(KeyValueStore):
    """``store`` with every key put under ``prefix``: one key space per user of a store."""

    def __init__(self, store: KeyValueStore, prefix: str):
        self.store = store
        self.prefix = prefix

    def set(self, key: str, value: bytes) -> None:
        self.store.set(self.prefix + key, value)

    def get(self, key: str, timeout_s: float) -> bytes:
        return self.store.get(self.prefix + key, timeout_s)

    def try_get(self, key: str) -> Optional[bytes]:
        return self.store.try_get(self.prefix + key)


# Wire format, one request per connection: a header (operation, key length, value length,
# timeout in seconds), the key, the value; the answer is a status byte, a length and the value.
_REQUEST = struct.Struct("!cIQd")
_ANSWER = struct.Struct("!cQ")
_SET, _GET, _TRY_GET = b"S", b"G", b"T"
_FOUND, _MISSING = b"+", b"-"


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed mid-message")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


class _Table:
    """The server's keys, with a condition that wakes the getters when one is set."""

    def __init__(self):
        self.values: dict[str, bytes] = {}
        self.changed = threading.Condition()

    def set(self, key: str, value: bytes) -> None:
        with self.changed:
            self.values[key] = value
            self.changed.notify_all()

    def get(self, key: str, timeout_s: float) -> Optional[bytes]:
        with self.changed:
            self.changed.wait_for(lambda: key in self.values, timeout=max(timeout_s, 0.0))
            return self.values.get(key)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        table: _Table = self.server.table  # type: ignore[attr-defined]
        try:
            op, key_size, value_size, timeout_s = _REQUEST.unpack(
                _read_exactly(self.request, _REQUEST.size))
            key = _read_exactly(self.request, key_size).decode()
            value = _read_exactly(self.request, value_size)
        except (ConnectionError, OSError, struct.error, UnicodeDecodeError):
            return  # a client that went away or spoke nonsense: nothing to answer
        if op == _SET:
            table.set(key, value)
            found: Optional[bytes] = b""
        else:
            found = table.get(key, timeout_s if op == _GET else 0.0)
        answer = (_ANSWER.pack(_MISSING, 0) if found is None
                  else _ANSWER.pack(_FOUND, len(found)) + found)
        try:
            self.request.sendall(answer)
        except OSError:
            pass  # the client gave up waiting


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True  # a getter still waiting never keeps the process alive
    allow_reuse_address = True


class TcpStore(KeyValueStore):
    """A ``KeyValueStore`` served over TCP by one process (the launcher or process 0).

    ``TcpStore.serve(host="127.0.0.1", port=0)`` starts the server on a thread and returns
    a client of it (``address`` says where it listens; ``close()`` stops it);
    ``TcpStore(host, port)`` is a client in another process. Each call opens its own
    connection, so calls from several threads never wait for each other.
    """

    def __init__(self, host: str, port: int):
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ArgumentError(f"TcpStore: port must be 1..65535, got {port!r}")
        self.host = host
        self.port = port
        self._server: Optional[_Server] = None

    @classmethod
    def serve(cls, host: str = "127.0.0.1", port: int = 0) -> "TcpStore":
        try:
            server = _Server((host, port), _Handler)
        except OSError as exc:
            raise UnavailableError(f"TcpStore: cannot listen on {host}:{port}: {exc}") from None
        server.table = _Table()  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, name="openhlo-tcp-store",
                         daemon=True).start()
        store = cls(host, server.server_address[1])
        store._server = server
        return store

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        """Stop the server (a client has nothing to close)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def set(self, key: str, value: bytes) -> None:
        self._call(_SET, key, bytes(value), 0.0)

    def get(self, key: str, timeout_s: float) -> bytes:
        value = self._call(_GET, key, b"", float(timeout_s))
        if value is None:
            raise DeadlineExceededError(f"key-value store {self.address}: key {key!r} was not "
                                        f"set within {timeout_s:g} s")
        return value

    def try_get(self, key: str) -> Optional[bytes]:
        return self._call(_TRY_GET, key, b"", 0.0)

    def _call(self, op: bytes, key: str, value: bytes, timeout_s: float) -> Optional[bytes]:
        encoded = key.encode()
        what = f"key-value store {self.address} ({'set' if op == _SET else 'get'} {key!r})"
        try:
            sock = socket.create_connection((self.host, self.port), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise UnavailableError(f"{what}: cannot connect: {exc}") from None
        with sock:
            # The server answers a get within timeout_s; the margin covers the transfer.
            sock.settimeout(timeout_s + CONNECT_TIMEOUT_S)
            started = time.monotonic()
            try:
                sock.sendall(_REQUEST.pack(op, len(encoded), len(value), timeout_s)
                             + encoded + value)
                status, size = _ANSWER.unpack(_read_exactly(sock, _ANSWER.size))
                found = _read_exactly(sock, size)
            except (OSError, ConnectionError) as exc:
                raise UnavailableError(f"{what}: no answer after "
                                       f"{time.monotonic() - started:.1f} s: {exc}") from None
        return found if status == _FOUND else None
