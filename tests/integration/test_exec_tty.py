"""A terminal in a sandbox: exec with "tty" upgraded to a WebSocket (docs/api.md,
"A terminal"), through a real agentboxd and a real sandbox.

The raw protocol is spoken by a small client written here with the standard
library (the handshake, masked frames, ping, close); `agentbox exec -it` is run
for real inside tmux: `stty size` shows the pane's size and then its new size
after a resize, Ctrl-C interrupts `sleep 100`, and `exit 3` is the client's
exit status.
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import AGENTBOX
from daemon import Daemon
import helpers
from wsclient import WebSocket

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
FRAME_MAX = 64 * 1024  # TERMINAL_FRAME_MAX (src/daemon/terminal.c)
# Bounds on liveness, not on speed: each is far above what the step takes.
DEADLINE_S = 20


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("tty")).start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def sbx(daemon):
    return daemon.create_sandbox(limits={"memory_mb": 256})


class WS(WebSocket):
    """exec with "tty" over agentboxd's unix socket: the POST form."""

    def __init__(self, daemon, sid, body, headers=None, key=None):
        self.key = key or base64.b64encode(os.urandom(16)).decode()
        data = json.dumps(body).encode()
        hdrs = {"Host": "localhost", "Content-Type": "application/json",
                "Content-Length": str(len(data)), "Upgrade": "websocket",
                "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": self.key}
        hdrs.update(headers or {})
        head = f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdrs.items() if v is not None) + "\r\n"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(daemon.socket)
        super().__init__(sock, head.encode() + data)


def open_tty(daemon, sid, command, **extra):
    ws = WS(daemon, sid, {"command": command, "tty": True, **extra})
    assert ws.status == 101, (ws.status, ws.buf)
    return ws


def test_handshake_accept_and_exit_status(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh", "-c", "printf ready; exit 3"])
    want = base64.b64encode(hashlib.sha1((ws.key + GUID).encode()).digest()).decode()
    assert ws.headers["sec-websocket-accept"] == want
    assert ws.headers["upgrade"].lower() == "websocket"
    assert "upgrade" in ws.headers["connection"].lower()
    out, texts, code = ws.until_close()
    assert out == b"ready"
    assert code == 1000
    [exit_msg] = texts
    assert exit_msg["type"] == "exit" and exit_msg["exit_code"] == 3
    assert exit_msg["signal"] is None and isinstance(exit_msg["pid"], int)
    ws.close()


def test_a_real_terminal_its_size_and_resize(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh"], rows=33, cols=101)
    ws.type("tty; stty size; echo mark-$((6*7))\n")
    out, _ = ws.read_until(b"mark-42")
    assert b"/dev/pts/" in out, out
    assert b"33 101" in out, out
    ws.control({"type": "resize", "rows": 40, "cols": 120})
    ws.type("stty size; echo mark-$((7*7))\n")
    out, _ = ws.read_until(b"mark-49")
    assert b"40 120" in out, out
    ws.type("exit 0\n")
    _, texts, code = ws.until_close()
    assert texts[-1]["exit_code"] == 0 and code == 1000
    ws.close()


def sleep_runs(daemon, sbx, arg):
    """Whether `sleep ARG` runs in the sandbox now (its /proc, through an exec)."""
    r = daemon.exec(sbx, ["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo"])
    return f"sleep {arg} " in r["stdout"]


def test_ctrl_c_reaches_the_foreground_process(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh"])
    assert not sleep_runs(daemon, sbx, 271)  # none left from elsewhere
    ws.type("sleep 271; echo after-$((1+1))\n")
    # sleep runs before the Ctrl-C: sent earlier, it would reach the shell and
    # flush the typed line, and the test would pass without testing anything
    assert helpers.wait_until(lambda: sleep_runs(daemon, sbx, 271), DEADLINE_S, 0.1)
    started = time.monotonic()
    ws.type(b"\x03")
    ws.type("echo back-$((2+2))\n")
    ws.read_until(b"back-4")
    # not interrupted, it would end at 271 s: the bound says which, not how fast
    assert time.monotonic() - started < 271, "Ctrl-C did not interrupt sleep 271"
    assert not sleep_runs(daemon, sbx, 271)
    ws.type("exit 5\n")
    _, texts, _ = ws.until_close()
    assert texts[-1]["exit_code"] == 5
    ws.close()


def test_a_killed_process_reports_its_signal(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh", "-c", "kill -TERM $$"])
    _, texts, code = ws.until_close()
    assert texts[-1]["signal"] == 15 and texts[-1]["exit_code"] == 143
    assert code == 1000
    ws.close()


def test_ping_is_answered_with_pong(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh"])
    ws.send(0x9, b"hello")
    while True:
        op, payload = ws.frame()
        if op == 0xA:
            assert payload == b"hello"
            break
    ws.type("exit\n")
    ws.until_close()
    ws.close()


def test_the_client_closing_hangs_the_session_up(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh", "-c", "echo started; sleep 100"])
    ws.read_until(b"started")
    pid = None
    status, body = daemon.request("GET", f"/v1/sandboxes/{sbx}/processes")
    for p in body["processes"]:
        if p["command"] == ["sh", "-c", "echo started; sleep 100"] and p["running"]:
            pid = p["pid"]
    assert pid
    ws.send(0x8, struct.pack(">H", 1000))
    op, payload = ws.frame()
    assert op == 0x8 and struct.unpack(">H", payload[:2])[0] == 1000
    ws.close()
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        status, body = daemon.request("GET", f"/v1/sandboxes/{sbx}/processes")
        [p] = [p for p in body["processes"] if p["pid"] == pid]
        if not p["running"]:
            assert p["signal"] == 1  # SIGHUP: its terminal went away
            return
        time.sleep(0.05)
    raise AssertionError("the process outlived its terminal")


def test_a_frame_above_the_limit_is_closed_with_1009(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh"])
    ws.send(0x2, b"x" * (FRAME_MAX + 1))
    _, _, code = ws.until_close()
    assert code == 1009
    ws.close()


def test_a_frame_at_the_limit_is_typed(daemon, sbx):
    # raw first: a canonical line holds only 4096 bytes
    ws = open_tty(daemon, sbx, ["sh", "-c", "stty raw -echo; echo ready; head -c 65536 | wc -c"])
    ws.read_until(b"ready")
    ws.send(0x2, b"y" * FRAME_MAX)
    out, texts, code = ws.until_close()
    assert b"65536" in out and texts[-1]["exit_code"] == 0 and code == 1000
    ws.close()


def test_an_unmasked_frame_is_closed_with_1002(daemon, sbx):
    ws = open_tty(daemon, sbx, ["sh"])
    ws.send(0x2, b"ls\n", mask=False)
    _, _, code = ws.until_close()
    assert code == 1002
    ws.close()


@pytest.mark.parametrize("msg, code", [
    (b"not json", 1007),
    (json.dumps({"type": "resize", "rows": 0, "cols": 80}).encode(), 1007),
    (json.dumps({"type": "launch"}).encode(), 1008),
])
def test_bad_control_messages_are_closed(daemon, sbx, msg, code):
    ws = open_tty(daemon, sbx, ["sh"])
    ws.send(0x1, msg)
    _, _, got = ws.until_close()
    assert got == code
    ws.close()


@pytest.mark.parametrize("headers, what", [
    ({"Upgrade": None, "Connection": None}, "Upgrade: websocket"),
    ({"Sec-WebSocket-Version": "8"}, "Sec-WebSocket-Version"),
    ({"Sec-WebSocket-Key": "c2hvcnQ="}, "Sec-WebSocket-Key"),
    ({"Sec-WebSocket-Key": None}, "Sec-WebSocket-Key"),
    ({"Connection": "keep-alive"}, "Connection: Upgrade"),
])
def test_a_bad_handshake_is_refused(daemon, sbx, headers, what):
    ws = WS(daemon, sbx, {"command": ["sh"], "tty": True}, headers=headers)
    assert ws.status == 400
    err = ws.error_body()["error"]
    assert err["code"] == "bad_handshake" and what in err["message"], err
    ws.close()


def test_an_upgrade_without_tty_is_refused(daemon, sbx):
    ws = WS(daemon, sbx, {"command": ["true"]})
    assert ws.status == 400 and ws.error_body()["error"]["code"] == "bad_handshake"
    ws.close()


@pytest.mark.parametrize("body, field", [
    ({"command": ["sh"], "tty": True, "rows": 0}, "rows"),
    ({"command": ["sh"], "tty": True, "cols": 4097}, "cols"),
    ({"command": ["sh"], "rows": 24}, "rows"),
    ({"command": ["sh"], "tty": True, "stdin": "x"}, "stdin"),
    ({"command": ["sh"], "tty": True, "background": True}, "background"),
    ({"command": ["sh"], "tty": "yes"}, "tty"),
])
def test_bad_terminal_requests_are_refused(daemon, sbx, body, field):
    ws = WS(daemon, sbx, body)
    assert ws.status == 400
    err = ws.error_body()["error"]
    assert err["code"] == "invalid_field" and err["field"] == field, err
    ws.close()


def test_a_command_that_cannot_run_is_answered_without_upgrade(daemon, sbx):
    ws = WS(daemon, sbx, {"command": ["no-such-command"], "tty": True})
    assert ws.status == 200
    assert ws.error_body()["exit_code"] == 127
    ws.close()


def test_the_terminal_is_the_sandbox_own(daemon):
    """The pty is of the sandbox's devpts: pts numbers start afresh, no host pty shows."""
    sid = daemon.create_sandbox(limits={"memory_mb": 128})
    ws = open_tty(daemon, sid, ["sh", "-c", "tty; ls /dev/pts; exit 0"])
    out, texts, _ = ws.until_close()
    lines = out.decode().split()
    assert lines[0] == "/dev/pts/0", out
    assert sorted(lines[1:]) == ["0", "ptmx"], out
    ws.close()


# ---- agentbox exec -it under tmux ------------------------------------------------------

TMUX = shutil.which("tmux")


class Tmux:
    def __init__(self, tmp_path):
        self.sock = str(tmp_path / "tmux.sock")

    def __call__(self, *args, check=True):
        return subprocess.run([TMUX, "-S", self.sock, *args], capture_output=True, text=True,
                              check=check, timeout=DEADLINE_S)

    def screen(self):
        return self("capture-pane", "-p", "-t", "t").stdout

    def wait_for(self, text, deadline_s=DEADLINE_S):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            s = self.screen()
            if text in s:
                return s
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} on the screen:\n{self.screen()}")


@pytest.fixture
def tmux(tmp_path):
    if not TMUX:
        pytest.skip("tmux is not installed (scripts/install-deps installs it)")
    t = Tmux(tmp_path)
    yield t
    t("kill-server", check=False)


def test_agentbox_exec_it_under_tmux(daemon, sbx, tmux, tmp_path):
    status_file = tmp_path / "status"
    # the status is written whole (rename), and the session ends with it
    cmd = (f"{AGENTBOX} exec --socket {daemon.socket} -it {sbx} -- sh; "
           f"echo $? > {status_file}.new; mv {status_file}.new {status_file}")
    tmux("new-session", "-d", "-s", "t", "-x", "91", "-y", "27", "sh", "-c", cmd)
    tmux.wait_for("$")  # the sandbox shell's prompt
    tmux("send-keys", "-t", "t", "stty size; echo m-$((3*3))", "Enter")
    screen = tmux.wait_for("m-9")
    assert "27 91" in screen, screen

    tmux("resize-window", "-t", "t", "-x", "75", "-y", "22")
    tmux("send-keys", "-t", "t", "clear; stty size; echo m-$((4*4))", "Enter")
    screen = tmux.wait_for("m-16")
    assert "22 75" in screen, screen

    assert not sleep_runs(daemon, sbx, 100)  # none left from elsewhere
    tmux("send-keys", "-t", "t", "clear; sleep 100; echo m-$((5*5))", "Enter")
    # sleep runs before the Ctrl-C (sent earlier, it would flush the typed line)
    assert helpers.wait_until(lambda: sleep_runs(daemon, sbx, 100), DEADLINE_S, 0.1)
    started = time.monotonic()
    tmux("send-keys", "-t", "t", "C-c")
    tmux("send-keys", "-t", "t", "echo m-$((6*6))", "Enter")
    screen = tmux.wait_for("m-36")
    # not interrupted, it would end at 100 s: the bound says which, not how fast
    assert time.monotonic() - started < 100, "Ctrl-C did not interrupt sleep 100"
    assert "m-25" not in screen  # the line after sleep did not run: it was interrupted

    tmux("send-keys", "-t", "t", "exit 3", "Enter")
    end = time.monotonic() + DEADLINE_S
    while not status_file.exists():
        assert time.monotonic() < end, "agentbox exec -it did not end after exit 3"
        time.sleep(0.05)
    assert status_file.read_text().strip() == "3"


def test_a_stopping_daemon_closes_its_terminals(tmp_path):
    """agentboxd's stop closes a terminal with 1001 (and does not wait on it for ever)."""
    d = Daemon(tmp_path).start()
    try:
        sid = d.create_sandbox(limits={"memory_mb": 128})
        ws = open_tty(d, sid, ["sh"])
        ws.type("echo up-$((2*3))\n")
        ws.read_until(b"up-6")
        d.proc.send_signal(signal.SIGTERM)
        _, texts, code = ws.until_close()
        assert code == 1001 and texts == [], (code, texts)
        d.proc.wait(timeout=DEADLINE_S)
        ws.close()
    finally:
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGTERM)
            d.proc.wait(timeout=DEADLINE_S)
        d.start()  # the sandbox outlived it: the next one removes it
        d.stop()


def test_exec_t_without_input(daemon, sbx):
    """-t alone: the output of a terminal, nothing typed, the exit status ours."""
    r = subprocess.run([AGENTBOX, "exec", "--socket", daemon.socket, "-t", sbx, "--", "sh", "-c",
                        "tty; test -t 0 && echo stdin-is-a-tty; exit 7"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=DEADLINE_S)
    assert r.returncode == 7, r
    assert b"/dev/pts/" in r.stdout and b"stdin-is-a-tty\r\n" in r.stdout, r.stdout


def test_exec_t_refusals_and_failures(daemon, sbx):
    base = [AGENTBOX, "exec", "--socket", daemon.socket]
    # -it needs a terminal to read from
    r = subprocess.run(base + ["-it", sbx, "--", "sh"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=DEADLINE_S)
    assert r.returncode == 125 and "needs a terminal on stdin" in r.stderr, r
    # a command that is not there: 127, as without -t
    r = subprocess.run(base + ["-t", sbx, "--", "no-such-command"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=DEADLINE_S)
    assert r.returncode == 127 and "no-such-command" in r.stderr, r
    # the API's refusal, in one line with its code
    r = subprocess.run(base + ["-t", "sbx_00000000000000000000000000", "--", "sh"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=DEADLINE_S)
    assert r.returncode == 125 and "(not_found)" in r.stderr, r
    r = subprocess.run(base + ["-t", "-d", sbx, "--", "sh"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=DEADLINE_S)
    assert r.returncode == 125 and "-t and -d" in r.stderr, r


def test_a_signal_to_agentbox_restores_the_terminal(daemon, sbx, tmux):
    """SIGTERM to `agentbox exec -it`: our terminal back as it was (not raw), 143, SIGHUP inside."""
    cmd = (f"{AGENTBOX} exec --socket {daemon.socket} -it {sbx} -- sh -c 'echo in-$((8*8)); "
           "sleep 100'; echo rc=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon "
           "-e echo -e -echo | tr '\\n' ' '; echo end; sleep 100")
    tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "30", "sh", "-c", cmd)
    tmux.wait_for("in-64")
    shell = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}").stdout)
    with open(f"/proc/{shell}/task/{shell}/children") as f:
        [client] = [int(p) for p in f.read().split()]
    # raw while it runs: the terminal of the pane has no canonical mode now
    os.kill(client, signal.SIGTERM)
    screen = tmux.wait_for("end")
    assert "rc=143" in screen, screen
    assert "icanon echo end" in screen, screen  # canonical and echoing again
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        status, body = daemon.request("GET", f"/v1/sandboxes/{sbx}/processes")
        procs = [p for p in body["processes"] if "in-$((8*8))" in " ".join(p["command"])]
        if procs and not procs[-1]["running"]:
            assert procs[-1]["signal"] == 1  # its terminal hung up
            return
        time.sleep(0.05)
    raise AssertionError("the command outlived agentbox's terminal")
