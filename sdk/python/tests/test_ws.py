"""The WebSocket client's framing (RFC 6455) against a server end written here, over a local
socket: no node needed."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import struct
import threading
import unittest
from typing import List, Tuple

from wheelhouse._ws import (
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Closed,
    UpgradeRefused,
    WebSocket,
    accept_key,
    encode_frame,
    mask,
)

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_client_frame(sock: socket.socket) -> Tuple[bool, int, bool, bytes]:
    """(fin, opcode, masked, unmasked payload) of one frame from the client, decoded independently."""
    first, second = read_exact(sock, 2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", read_exact(sock, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", read_exact(sock, 8))[0]
    masked = bool(second & 0x80)
    key = read_exact(sock, 4) if masked else b"\0\0\0\0"
    payload = bytes(b ^ key[i % 4] for i, b in enumerate(read_exact(sock, length)))
    return bool(first & 0x80), first & 0x0F, masked, payload


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        return struct.pack("!BB", first, n) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", first, 126, n) + payload
    return struct.pack("!BBQ", first, 127, n) + payload


class MaskTest(unittest.TestCase):
    def test_mask_is_the_rfc_xor_and_its_own_inverse(self) -> None:
        key = b"\x01\x02\x03\x04"
        data = os.urandom(1001)
        expected = bytes(b ^ key[i % 4] for i, b in enumerate(data))
        self.assertEqual(mask(data, key), expected)
        self.assertEqual(mask(mask(data, key), key), data)
        self.assertEqual(mask(b"", key), b"")

    def test_accept_key_matches_the_rfc_example(self) -> None:
        # RFC 6455 section 1.3.
        self.assertEqual(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_client_frames_are_masked_with_every_length_form(self) -> None:
        for size in (0, 5, 125, 126, 65535, 65536, 70000):
            payload = os.urandom(size)
            a, b = socket.socketpair()
            try:
                a.sendall(encode_frame(OP_TEXT, payload))
                fin, opcode, masked, got = read_client_frame(b)
                self.assertTrue(fin)
                self.assertEqual(opcode, OP_TEXT)
                self.assertTrue(masked, "a client frame must be masked")
                self.assertEqual(got, payload)
            finally:
                a.close()
                b.close()


class Server:
    """A one-connection WebSocket server end on 127.0.0.1, driven by a script."""

    def __init__(self, status: int = 101) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.status = status
        self.received: List[Tuple[int, bytes]] = []
        self.request = b""
        self.conn: socket.socket

    def accept(self) -> None:
        self.conn, _ = self.listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.conn.recv(4096)
        self.request = head
        key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key")][0]
        if self.status != 101:
            self.conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found")
            return
        accept = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
        self.conn.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )

    def close(self) -> None:
        self.listener.close()
        try:
            self.conn.close()
        except AttributeError:
            pass


class ConnectionTest(unittest.TestCase):
    def test_handshake_fragments_ping_pong_and_close(self) -> None:
        server = Server()
        thread = threading.Thread(target=server.accept)
        thread.start()
        ws = WebSocket.connect(f"ws://127.0.0.1:{server.port}/api/workers/connect", {"Authorization": "Bearer k"})
        thread.join()
        try:
            self.assertIn(b"GET /api/workers/connect HTTP/1.1", server.request)
            self.assertIn(b"Authorization: Bearer k", server.request)
            ws.send_text('{"type":"hello"}')
            self.assertEqual(read_client_frame(server.conn), (True, OP_TEXT, True, b'{"type":"hello"}'))
            # A fragmented text message with a ping between its fragments (control frames may interleave).
            server.conn.sendall(server_frame(OP_TEXT, b'{"a":', fin=False))
            server.conn.sendall(server_frame(OP_PING, b"hb"))
            server.conn.sendall(server_frame(0x0, b"1}", fin=True))
            self.assertEqual(ws.recv(), (OP_PING, b"hb"))
            self.assertEqual(read_client_frame(server.conn), (True, OP_PONG, True, b"hb"), "a ping is answered")
            self.assertEqual(ws.recv(), (OP_TEXT, b'{"a":1}'))
            # A large message in one frame (64-bit length).
            big = b"x" * 70000
            server.conn.sendall(server_frame(OP_TEXT, big))
            self.assertEqual(ws.recv(), (OP_TEXT, big))
            # The server closes: recv raises Closed with its code, and the client echoes the close.
            server.conn.sendall(server_frame(0x8, struct.pack("!H", 1001) + b"bye"))
            with self.assertRaises(Closed) as raised:
                ws.recv()
            self.assertEqual((raised.exception.code, raised.exception.reason), (1001, "bye"))
            fin, opcode, masked, payload = read_client_frame(server.conn)
            self.assertEqual((opcode, masked, struct.unpack("!H", payload[:2])[0]), (0x8, True, 1001))
        finally:
            ws.release()
            server.close()

    def test_a_refused_upgrade_says_its_status(self) -> None:
        server = Server(status=404)
        thread = threading.Thread(target=server.accept)
        thread.start()
        with self.assertRaises(UpgradeRefused) as raised:
            WebSocket.connect(f"ws://127.0.0.1:{server.port}/api/workers/connect")
        thread.join()
        server.close()
        self.assertEqual(raised.exception.status, 404)
        self.assertEqual(raised.exception.body, b"not found")

    def test_a_connection_that_ends_without_a_close_frame_is_closed(self) -> None:
        server = Server()
        thread = threading.Thread(target=server.accept)
        thread.start()
        ws = WebSocket.connect(f"ws://127.0.0.1:{server.port}/")
        thread.join()
        server.conn.close()
        with self.assertRaises(Closed) as raised:
            ws.recv()
        self.assertIsNone(raised.exception.code)
        ws.release()
        server.close()


if __name__ == "__main__":
    unittest.main()
