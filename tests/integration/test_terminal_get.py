"""A terminal a browser can open: GET /v1/sandboxes/{id}/exec as a WebSocket
handshake, the exec request in its query, the API key in Sec-WebSocket-Protocol
(docs/api.md, "GET /v1/sandboxes/{id}/exec"), through a real agentboxd and a
real sandbox, on its unix socket and on loopback TCP.

The client is written here with the standard library, as a browser's
`new WebSocket(url, ["agentbox.terminal.v1", "agentbox.key." + base64url(key)])`
would speak: a GET, its subprotocols, and an Origin when a page is made to.
"""
import base64
import hashlib
import http.client
import json
import os
import socket
import time
import urllib.parse

import pytest

from daemon import Daemon
from wsclient import WebSocket

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOL = "agentbox.terminal.v1"
GOOD_ORIGIN = "https://console.example"
DEADLINE_S = 20  # a bound on liveness, not on speed


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def b64url(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def key_protocols(key):
    return f"{PROTOCOL}, agentbox.key.{b64url(key)}"


class WS(WebSocket):
    """A GET handshake to .../exec with query (a list of pairs), then frames."""

    def __init__(self, where, sid, query, headers=None):
        self.key = base64.b64encode(os.urandom(16)).decode()
        hdrs = {"Host": "localhost", "Upgrade": "websocket", "Connection": "Upgrade",
                "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": self.key}
        hdrs.update(headers or {})
        qs = query if isinstance(query, str) else urllib.parse.urlencode(
            query, quote_via=urllib.parse.quote)
        head = f"GET /v1/sandboxes/{sid}/exec?{qs} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdrs.items() if v is not None) + "\r\n"
        if isinstance(where, int):
            sock = socket.create_connection(("127.0.0.1", where), timeout=DEADLINE_S)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(where)
        super().__init__(sock, head.encode())

    def error(self):
        body = self.error_body()
        self.sock.close()
        return body["error"]

    def until_close(self, deadline_s=DEADLINE_S):
        out, texts, code = super().until_close(deadline_s)
        self.sock.close()
        return out, texts, code


def tcp_request(port, key, method, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers={"Authorization": f"Bearer {key}"})
    r = conn.getresponse()
    body = json.loads(r.read() or b"null")
    conn.close()
    return r.status, body


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("terminal-get")
    port = free_port()
    d = Daemon(tmp, "--listen", f"127.0.0.1:{port}", "--allow-origin", GOOD_ORIGIN).start()
    d.port, d.logpath, d.key = port, tmp / "agentboxd.log", d.admin_key()
    d.sid = d.create_sandbox(limits={"memory_mb": 256})
    yield d
    d.stop()


def test_a_get_handshake_opens_a_terminal_of_the_query(world):
    ws = WS(world.socket, world.sid, [("command", "sh"), ("rows", "33"), ("cols", "101"),
                                      ("env", "GREETING=hello there"), ("cwd", "/tmp")])
    assert ws.status == 101, ws.buf
    want = base64.b64encode(hashlib.sha1((ws.key + GUID).encode()).digest()).decode()
    assert ws.headers["sec-websocket-accept"] == want
    assert "sec-websocket-protocol" not in ws.headers  # none offered, none named
    ws.type("stty size; echo \"$GREETING\" $PWD; exit 3\n")
    out, texts, code = ws.until_close()
    assert b"33 101" in out, out
    assert b"hello there /tmp" in out, out
    assert texts[-1]["type"] == "exit" and texts[-1]["exit_code"] == 3, texts
    assert code == 1000


def test_command_words_keep_their_order(world):
    ws = WS(world.socket, world.sid,
            [("command", "sh"), ("command", "-c"), ("command", "printf '%s|' \"$@\"; exit 3"),
             ("command", "x"), ("command", "a b"), ("command", "c&d=e"), ("tty", "1")])
    assert ws.status == 101, ws.buf
    out, texts, _ = ws.until_close()
    assert out == b"a b|c&d=e|", out
    assert texts[-1]["exit_code"] == 3


def test_a_plus_is_a_space_as_a_browser_writes_it(world):
    # URLSearchParams writes a space as '+', and '+' itself as %2B
    ws = WS(world.socket, world.sid, "command=printf&command=%25s%7C&command=a+b&command=1%2B1")
    assert ws.status == 101, ws.buf
    assert ws.until_close()[0] == b"a b|1+1|"


def test_over_tcp_the_key_in_the_subprotocol(world):
    ws = WS(world.port, world.sid, [("command", "sh"), ("command", "-c"),
                                    ("command", "exit 3")],
            {"Sec-WebSocket-Protocol": key_protocols(world.key)})
    assert ws.status == 101, ws.buf
    assert ws.headers["sec-websocket-protocol"] == PROTOCOL
    _, texts, code = ws.until_close()
    assert texts[-1]["exit_code"] == 3 and code == 1000
    # recorded in the audit log as the POST form is, by the key's id, never its secret
    end = time.monotonic() + DEADLINE_S
    while True:  # the row is written once the answer is sent
        status, body = tcp_request(world.port, world.key, "GET",
                                   "/v1/audit?route=GET%20/v1/sandboxes/%7Bid%7D/exec")
        assert status == 200, body
        rows = [r for r in body["entries"] if r["target"] == world.sid and r["key_id"]]
        if rows or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert rows and rows[0]["status"] == 101, body
    assert rows[0]["key_id"] == world.key.split("_")[1], rows[0]
    secret = world.key.split("_")[2]
    assert secret not in json.dumps(body)
    assert secret.encode() not in world.logpath.read_bytes()
    assert b64url(world.key).encode() not in world.logpath.read_bytes()


@pytest.mark.parametrize("protocols", [
    lambda key: key_protocols(key[:-1] + ("a" if key[-1] != "a" else "b")),  # a wrong secret
    lambda key: f"{PROTOCOL}, agentbox.key.not*base64",
    lambda key: f"{PROTOCOL}, agentbox.key.{b64url(key)}, agentbox.key.{b64url(key)}",
    lambda key: PROTOCOL,  # no key at all
])
def test_over_tcp_a_wrong_or_missing_key_is_401(world, protocols):
    ws = WS(world.port, world.sid, [("command", "sh")],
            {"Sec-WebSocket-Protocol": protocols(world.key)})
    assert ws.status == 401, ws.buf
    assert ws.error()["code"] == "unauthorized"


def test_a_key_in_the_query_is_never_read(world):
    # alone it is no key at all: 401, as without one
    ws = WS(world.port, world.sid, [("command", "sh"), ("access_token", world.key)],
            {"Sec-WebSocket-Protocol": PROTOCOL})
    assert ws.status == 401, ws.buf
    # with the key where it belongs, the query's is refused, naming it
    for name in ("access_token", "token", "key"):
        ws = WS(world.port, world.sid, [("command", "sh"), (name, world.key)],
                {"Sec-WebSocket-Protocol": key_protocols(world.key)})
        assert ws.status == 400, ws.buf
        err = ws.error()
        assert err["code"] == "invalid_field" and err["field"] == name, err
        assert world.key not in err["message"]


def test_the_key_subprotocol_is_read_on_a_terminal_handshake_only(world):
    conn = http.client.HTTPConnection("127.0.0.1", world.port, timeout=30)
    conn.request("GET", "/v1/sandboxes",
                 headers={"Sec-WebSocket-Protocol": key_protocols(world.key)})
    assert conn.getresponse().status == 401
    conn.close()


@pytest.mark.parametrize("query, code, field", [
    ([("command", "sh"), ("shell", "bash")], "unknown_field", "shell"),
    ([("command", "sh"), ("stdin", "x")], "unknown_field", "stdin"),
    ([("command", "sh"), ("rows", "0")], "invalid_field", "rows"),
    ([("command", "sh"), ("rows", "4097")], "invalid_field", "rows"),
    ([("command", "sh"), ("rows", "abc")], "invalid_field", "rows"),
    ([("command", "sh"), ("rows", "3"), ("rows", "4")], "invalid_field", "rows"),
    ([("command", "sh"), ("cols", "-1")], "invalid_field", "cols"),
    ([("command", "sh"), ("timeout_s", "86401")], "invalid_field", "timeout_s"),
    ([("command", "sh"), ("cwd", "tmp")], "invalid_field", "cwd"),
    ([("command", "sh"), ("env", "NOEQUALS")], "invalid_field", "env"),
    ([("command", "sh"), ("env", "1X=y")], "invalid_field", 'env["1X"]'),
    ([("command", "sh"), ("tty", "0")], "invalid_field", "tty"),
    ([("command", "")], "invalid_field", "command[0]"),
    ([("rows", "3")], "missing_field", "command"),
])
def test_bad_parameters_are_400_naming_them(world, query, code, field):
    ws = WS(world.socket, world.sid, query)
    assert ws.status == 400, ws.buf
    err = ws.error()
    assert (err["code"], err.get("field")) == (code, field), err


def test_a_get_without_the_handshake_is_refused(world):
    ws = WS(world.socket, world.sid, [("command", "sh")], {"Upgrade": None})
    assert ws.status == 400
    assert ws.error()["code"] == "bad_handshake"


def test_subprotocols_must_include_the_terminal_one(world):
    ws = WS(world.socket, world.sid, [("command", "sh")], {"Sec-WebSocket-Protocol": "chat"})
    assert ws.status == 400, ws.buf
    err = ws.error()
    assert (err["code"], err["field"]) == ("bad_handshake", "Sec-WebSocket-Protocol")


def test_the_origin_rule(world):
    # a page of another site, with the key: refused before anything runs
    for origin in ("https://evil.example", "null", GOOD_ORIGIN + ".evil.example"):
        ws = WS(world.port, world.sid, [("command", "sh")],
                {"Sec-WebSocket-Protocol": key_protocols(world.key), "Origin": origin})
        assert ws.status == 403, (origin, ws.buf)
        err = ws.error()
        assert (err["code"], err["field"]) == ("forbidden", "Origin"), err
    # on the unix socket too: the rule is about the page, not the listener
    ws = WS(world.socket, world.sid, [("command", "sh")], {"Origin": "https://evil.example"})
    assert ws.status == 403
    ws.sock.close()
    # a page of an allowed origin (any case), with its key: a terminal
    ws = WS(world.port, world.sid, [("command", "sh"), ("command", "-c"), ("command", "exit 3")],
            {"Sec-WebSocket-Protocol": key_protocols(world.key),
             "Origin": GOOD_ORIGIN.upper()})
    assert ws.status == 101, ws.buf
    assert ws.until_close()[1][-1]["exit_code"] == 3


def test_bad_keys_in_the_subprotocol_charge_the_failed_auths(tmp_path):
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"127.0.0.1:{port}", "--auth-fail-rate", "1",
               "--auth-fail-burst", "3").start()
    try:
        sid = "sbx_" + "0" * 26
        bad = key_protocols("abx_" + "0" * 12 + "_" + "a" * 52)
        statuses = [WS(port, sid, [("command", "sh")],
                       {"Sec-WebSocket-Protocol": bad}).status for _ in range(4)]
        assert statuses[:3] == [401, 401, 401] and statuses[3] == 429, statuses
    finally:
        d.stop()


def test_agentboxd_refuses_a_bad_allow_origin(tmp_path):
    for bad in ("console.example", "https://console.example/", "https://a.example/path",
                "ftp://x.example"):
        d = Daemon(tmp_path, "--allow-origin", bad)
        with pytest.raises(AssertionError, match="exited 2"):
            d.start()
