"""A small WebSocket client (RFC 6455), standard library only: what the worker channel needs.

Text frames out (masked, as a client must), text frames in (unmasked from a server; a masked one
is read all the same), fragmented messages joined, pings answered with pongs, and the close
handshake. No extensions (no compression: the node's frames are small JSON and near). One thread
reads (``recv``); any thread may send (sends are serialised by a lock).
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import threading
import urllib.parse
from typing import Dict, Mapping, Optional, Tuple, Union

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

#: Largest message accepted from the server, bytes (a ``tasks`` frame of 1 000 large payloads fits).
MAX_MESSAGE_BYTES = 512 * 1024 * 1024


class WebSocketError(Exception):
    """The connection broke, or the peer broke the protocol."""


class UpgradeRefused(WebSocketError):
    """The server answered the upgrade with an HTTP status other than 101."""

    def __init__(self, url: str, status: int, body: bytes) -> None:
        super().__init__(f"{url}: the upgrade was answered {status}")
        self.url = url
        self.status = status
        self.body = body


class Closed(WebSocketError):
    """The close handshake happened (or the connection ended): ``code`` and ``reason`` as received."""

    def __init__(self, code: Optional[int], reason: str) -> None:
        super().__init__(f"closed {code}: {reason}" if code is not None else "connection closed")
        self.code = code
        self.reason = reason


def mask(payload: bytes, key: bytes) -> bytes:
    """XORs ``payload`` with the 4-byte ``key`` repeated (RFC 6455 5.3), fast for large payloads."""
    n = len(payload)
    if n == 0:
        return payload
    repeated = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "little") ^ int.from_bytes(repeated, "little")).to_bytes(n, "little")


def encode_frame(opcode: int, payload: bytes, key: Optional[bytes] = None, fin: bool = True) -> bytes:
    """One frame; masked with ``key`` (4 random bytes when None), as every client frame must be."""
    if key is None:
        key = os.urandom(4)
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        header = struct.pack("!BB", first, 0x80 | n)
    elif n < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, n)
    return header + key + mask(payload, key)


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key``."""
    return base64.b64encode(hashlib.sha1((key + _GUID).encode("ascii")).digest()).decode("ascii")


def split_url(url: str) -> Tuple[bool, str, int, str]:
    """``ws(s)://host:port/path?q`` (or http(s)) → (tls, host, port, path with query)."""
    parts = urllib.parse.urlsplit(url)
    tls = parts.scheme in ("wss", "https")
    if parts.scheme not in ("ws", "wss", "http", "https"):
        raise ValueError(f"not a WebSocket URL: {url}")
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if tls else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return tls, host, port, path


class WebSocket:
    """One client connection. ``connect`` opens it; ``recv`` returns text messages until it closes."""

    def __init__(self, sock: Union[socket.socket, ssl.SSLSocket], leftover: bytes = b"") -> None:
        self._sock = sock
        self._buffer = bytearray(leftover)
        self._send_lock = threading.Lock()
        self._close_sent = False
        self._partial = bytearray()
        self._partial_op: Optional[int] = None
        self.close_code: Optional[int] = None
        self.close_reason = ""

    @classmethod
    def connect(
        cls,
        url: str,
        headers: Optional[Mapping[str, str]] = None,
        timeout: float = 10.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> "WebSocket":
        """Opens the TCP (or TLS) connection and does the opening handshake within ``timeout`` s."""
        tls, host, port, path = split_url(url)
        raw = socket.create_connection((host, port), timeout=timeout)
        sock: Union[socket.socket, ssl.SSLSocket] = raw
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls:
                sock = (ssl_context or ssl.create_default_context()).wrap_socket(raw, server_hostname=host)
            key = base64.b64encode(os.urandom(16)).decode("ascii")
            host_header = host if port in (80, 443) else f"{host}:{port}"
            lines = [
                f"GET {path} HTTP/1.1",
                f"Host: {host_header}",
                "Upgrade: websocket",
                "Connection: Upgrade",
                f"Sec-WebSocket-Key: {key}",
                "Sec-WebSocket-Version: 13",
            ]
            for name, value in (headers or {}).items():
                lines.append(f"{name}: {value}")
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            status, answer, rest = _read_http_head(sock)
            if status != 101:
                body = rest
                length = int(answer.get("content-length", "0") or 0)
                while len(body) < length:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    body += chunk
                raise UpgradeRefused(url, status, body)
            if answer.get("sec-websocket-accept") != accept_key(key):
                raise WebSocketError(f"{url}: the server's Sec-WebSocket-Accept does not match the key")
            sock.settimeout(None)
            return cls(sock, rest)
        except BaseException:
            sock.close()
            raise

    # -- sending ---------------------------------------------------------------------------

    def send_text(self, text: str) -> None:
        self._send(OP_TEXT, text.encode("utf-8"))

    def send_texts(self, texts: "list[str]") -> None:
        """Several text messages in one write (one system call for a results frame and its credit)."""
        data = b"".join(encode_frame(OP_TEXT, t.encode("utf-8")) for t in texts)
        with self._send_lock:
            if self._close_sent:
                raise Closed(self.close_code, "the close handshake has begun")
            try:
                self._sock.sendall(data)
            except OSError as error:
                raise WebSocketError(f"send failed: {error}") from error

    def ping(self, payload: bytes = b"") -> None:
        self._send(OP_PING, payload)

    def pong(self, payload: bytes = b"") -> None:
        self._send(OP_PONG, payload)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Sends a close frame (once); the peer's answer ends ``recv``. Errors are ignored: the socket may be gone."""
        with self._send_lock:
            if self._close_sent:
                return
            self._close_sent = True
            try:
                payload = struct.pack("!H", code) + reason.encode("utf-8")[:120]
                self._sock.sendall(encode_frame(OP_CLOSE, payload))
            except OSError:
                pass

    def _send(self, opcode: int, payload: bytes) -> None:
        frame = encode_frame(opcode, payload)
        with self._send_lock:
            if self._close_sent:
                raise Closed(self.close_code, "the close handshake has begun")
            try:
                self._sock.sendall(frame)
            except OSError as error:
                raise WebSocketError(f"send failed: {error}") from error

    @property
    def closing(self) -> bool:
        """A close frame was sent."""
        return self._close_sent

    # -- receiving -------------------------------------------------------------------------

    def recv(self) -> Tuple[int, bytes]:
        """The next message as (opcode, payload): ``OP_TEXT``/``OP_BINARY``, or ``OP_PING``/``OP_PONG``
        control frames (a ping is answered here already). Raises ``Closed`` at the close handshake
        or when the connection ends."""
        # A fragmented message's parts are kept across calls: a ping may come between them.
        message = self._partial
        while True:
            fin, opcode, payload = self._read_frame()
            if opcode == OP_CLOSE:
                code: Optional[int] = None
                reason = ""
                if len(payload) >= 2:
                    code = struct.unpack("!H", payload[:2])[0]
                    reason = payload[2:].decode("utf-8", "replace")
                self.close_code, self.close_reason = code, reason
                self.close(code if code is not None and code not in (1005, 1006) else 1000)
                raise Closed(code, reason)
            if opcode == OP_PING:
                try:
                    self.pong(payload)
                except WebSocketError:
                    pass
                return OP_PING, payload
            if opcode == OP_PONG:
                return OP_PONG, payload
            if opcode in (OP_TEXT, OP_BINARY):
                if self._partial_op is not None:
                    raise WebSocketError("a new message began inside a fragmented one")
                self._partial_op = opcode
            elif opcode == OP_CONT:
                if self._partial_op is None:
                    raise WebSocketError("a continuation frame without a message")
            else:
                raise WebSocketError(f"unknown opcode {opcode}")
            message += payload
            if len(message) > MAX_MESSAGE_BYTES:
                raise WebSocketError("message too large")
            if fin:
                op, data = self._partial_op, bytes(message)
                self._partial_op = None
                message.clear()
                return op, data

    def _read_exact(self, n: int) -> bytes:
        while len(self._buffer) < n:
            try:
                chunk = self._sock.recv(max(65536, n - len(self._buffer)))
            except OSError as error:
                raise Closed(None, f"connection lost: {error}") from error
            if not chunk:
                raise Closed(None, "connection ended without a close frame")
            self._buffer += chunk
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def _read_frame(self) -> Tuple[bool, int, bytes]:
        first, second = self._read_exact(2)
        fin = bool(first & 0x80)
        if first & 0x70:
            raise WebSocketError("reserved bits set: no extension was agreed")
        opcode = first & 0x0F
        masked = bool(second & 0x80)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read_exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read_exact(8))[0]
        if length > MAX_MESSAGE_BYTES:
            raise WebSocketError("frame too large")
        key = self._read_exact(4) if masked else b""
        payload = self._read_exact(length)
        if masked:
            payload = mask(payload, key)
        return fin, opcode, payload

    def shutdown(self) -> None:
        """Ends the connection at once, without a close handshake: ``recv`` raises ``Closed``."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def release(self) -> None:
        """Frees the socket (after ``recv`` has ended)."""
        try:
            self._sock.close()
        except OSError:
            pass


def _read_http_head(sock: Union[socket.socket, ssl.SSLSocket]) -> Tuple[int, Dict[str, str], bytes]:
    """Reads an HTTP response head: (status, lower-cased headers, bytes read past the head)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise WebSocketError("the server closed the connection during the handshake")
        data += chunk
        if len(data) > 65536:
            raise WebSocketError("the handshake answer's head is too large")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError) as error:
        raise WebSocketError(f"not an HTTP answer: {lines[0]!r}") from error
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest
