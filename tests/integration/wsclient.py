"""A WebSocket client of agentboxd's terminal (RFC 6455), for the tests: the
opening handshake sent as given, the answer's head parsed, then frames.
test_exec_tty.py opens it with the POST form, test_terminal_get.py with the
GET form."""
import json
import os
import struct
import time

DEADLINE_S = 20  # a bound on liveness, not on speed


class WebSocket:
    def __init__(self, sock, request):
        """Send request (the handshake's bytes) on sock and read the answer's head."""
        self.sock = sock
        self.sock.settimeout(DEADLINE_S)
        self.sock.sendall(request)
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, v in
                        (line.split(":", 1) for line in lines[1:])}

    def error_body(self):
        """The JSON body of an answer that is not a 101."""
        n = int(self.headers["content-length"])
        while len(self.buf) < n:
            self.buf += self.sock.recv(65536)
        return json.loads(self.buf[:n])

    def send(self, opcode, payload, fin=True, mask=True, length=None):
        n = len(payload) if length is None else length
        head = bytes([(0x80 if fin else 0) | opcode])
        m = 0x80 if mask else 0
        if n < 126:
            head += bytes([m | n])
        elif n < 65536:
            head += bytes([m | 126]) + struct.pack(">H", n)
        else:
            head += bytes([m | 127]) + struct.pack(">Q", n)
        if mask:
            key = os.urandom(4)
            head += key
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + payload)

    def type(self, data):
        self.send(0x2, data if isinstance(data, bytes) else data.encode())

    def control(self, msg):
        self.send(0x1, json.dumps(msg).encode())

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the server closed the connection")
            self.buf += chunk

    def frame(self):
        """The next frame: (opcode, payload). Server frames are never masked."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        assert b0 & 0x70 == 0 and b1 & 0x80 == 0, "reserved bits, or a masked server frame"
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack(">Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        return b0 & 0x0F, payload

    def read_until(self, needle, deadline_s=DEADLINE_S):
        """Terminal output up to needle (bytes); the text frames seen on the way."""
        out, texts = b"", []
        end = time.monotonic() + deadline_s
        while needle not in out:
            assert time.monotonic() < end, f"no {needle!r} in {out!r}"
            op, payload = self.frame()
            if op == 0x2:
                out += payload
            elif op == 0x1:
                texts.append(json.loads(payload))
            elif op == 0x8:
                raise AssertionError(f"closed before {needle!r}: {payload!r}, output {out!r}")
        return out, texts

    def until_close(self, deadline_s=DEADLINE_S):
        """Everything up to the close: (output, text messages, close code)."""
        out, texts = b"", []
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            op, payload = self.frame()
            if op == 0x2:
                out += payload
            elif op == 0x1:
                texts.append(json.loads(payload))
            elif op == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                return out, texts, code
        raise AssertionError(f"no close within {deadline_s} s: {out!r}")

    def close(self):
        self.sock.close()
