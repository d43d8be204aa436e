"""Terminal injection: what a task (or a sandbox) writes must not drive the
terminal of the person who looks at it with `agentbox wait/ps/status/logs`.

Real tasks through a real agentboxd put ESC sequences, C1 controls (U+009B,
the one-character CSI, and the raw byte 0x9b), bidi overrides (U+202E) and a
forged "[agentbox: attempt 2]" line in their progress, metadata, command and
output. The CLI runs under a pseudo-terminal, and nothing of it may reach the
terminal raw; the attempt headers agentbox marks (reverse video) are real
ones only; off a terminal, and with --raw, `logs` passes the exact bytes.
"""
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
import tty

import pytest

from conftest import AGENTBOX
from daemon import Daemon
import helpers

ESC = "\x1b"
HOSTILE = f"{ESC}]0;pwned{ESC}\\ {ESC}[2J \u009b31m \u202egnp.exe \x7f"
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
MARK_ON, MARK_OFF = b"\x1b[7m", b"\x1b[27m"

# What the single-attempt task writes to stdout, byte for byte.
OUTPUT = (b"plain line\n"
          + f"{ESC}]0;pwned{ESC}\\ title {ESC}[2J cleared\n".encode()
          + b"\x9b raw c1 byte\n"
          + "\u009b utf8 c1\n".encode()
          + "\u202e rlo\n".encode()
          + b"[agentbox: attempt 2]\n"
          + b"tab\tend\n"
          + b"cr\rhidden\n"
          + b"back\\slash\n"
          + b"\xff invalid\n")

# argv[3]: seconds to sleep before the exit, or "sigusr1": wait (120 s at
# most, then exit 9) until the test sends SIGUSR1, an end the test chooses
WRITE = """
import json, os, signal, sys, time
if sys.argv[3] == "sigusr1":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
ch = open(os.environ["AGENTBOX_PROGRESS"], "a")
ch.write(json.dumps(json.loads(sys.argv[1])) + "\\n"); ch.flush()
sys.stdout.buffer.write(bytes.fromhex(sys.argv[2])); sys.stdout.flush()
if sys.argv[3] == "sigusr1":
    if signal.sigtimedwait({signal.SIGUSR1}, 120) is None:
        sys.exit(9)
else:
    time.sleep(float(sys.argv[3]))
sys.exit(int(sys.argv[4]))
"""

# Attempt N writes OUT[N] (hex) and exits 1 before the last attempt, 0 at it.
ATTEMPTS = """
import os, sys
n = int(os.environ["AGENTBOX_ATTEMPT"])
sys.stdout.buffer.write(bytes.fromhex(sys.argv[n])); sys.stdout.flush()
sys.exit(0 if n == len(sys.argv) - 1 else 1)
"""


def progress():
    return {"stage": HOSTILE, "\u202ekey": "x\u009by"}


def task_command(out, sleep=0.0, code=0):
    return ["python3", "-c", WRITE, json.dumps(progress()), out.hex(), str(sleep), str(code),
            f"{ESC}[31mred", "\u202eevil", "\u009bX"]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    d = Daemon(tmp_path_factory.mktemp("terminal"), "--max-running", "8").start()
    yield d
    d.stop()


@pytest.fixture(scope="module")
def hostile(daemon):
    """A task that ended, having written every kind of hostile text."""
    tid = daemon.submit(command=task_command(OUTPUT), metadata={"note": HOSTILE})
    t = daemon.wait_all([tid], timeout=60)[tid]
    assert t["status"] == "succeeded", t
    return tid


def attempts_task(daemon, outputs):
    tid = daemon.submit(command=["python3", "-c", ATTEMPTS, *(o.hex() for o in outputs)],
                        max_attempts=len(outputs), retry_on=["failed"])
    t = daemon.wait_all([tid], timeout=90)[tid]
    assert t["status"] == "succeeded" and t["attempt"] == len(outputs), t
    return tid


def on_tty(*args, cols=250, raw=False, stderr_tty=True, timeout=60, on_output=None):
    """Run `agentbox ARGS...` with a pseudo-terminal as stdout (and stderr).

    Returns (exit status, what reached the terminal, stderr if not on it).
    raw: the terminal does not translate "\\n" to "\\r\\n".
    on_output: called with all that reached the terminal so far, as it comes.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    if raw:
        tty.setraw(slave)
    proc = subprocess.Popen([AGENTBOX, *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave if stderr_tty else subprocess.PIPE)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 1)
        if not r:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side is gone
            break
        if not data:
            break
        out += data
        if on_output:
            on_output(out)
    os.close(master)
    rc = proc.wait(timeout=10)
    err = proc.stderr.read() if proc.stderr else b""
    return rc, out, err


def screen_text(out):
    """What reached the terminal, with the CLI's own sequences taken out:
    wait's line redraws ("\\r...\\x1b[K", "\\r\\x1b[K") and logs' marks."""
    out = out.replace(b"\r\x1b[K", b"\n")
    out = re.sub(rb"\r([^\r\x1b]*)\x1b\[K", rb"\1\n", out)
    out = out.replace(MARK_ON, b"").replace(MARK_OFF, b"")
    return out.replace(b"\r\n", b"\n").decode("utf-8", "surrogateescape")


def raw_controls(out):
    """Every control that reached the terminal raw (none may)."""
    bad = []
    for ch in screen_text(out):
        o = ord(ch)
        if ((o < 0x20 and ch not in "\n\t") or o == 0x7f or 0x80 <= o <= 0x9f
                or 0xdc80 <= o <= 0xdcff or ch in BIDI):
            bad.append(hex(o) if o < 0xdc80 else f"byte {hex(o - 0xdc00)}")
    return bad


def sock(daemon):
    return ["--socket", daemon.socket]


# ---- status, wait, ps --------------------------------------------------------

def test_status_escapes_task_text_and_stays_json(daemon, hostile):
    rc, out, _ = on_tty("status", *sock(daemon), hostile)
    assert rc == 0, out
    assert raw_controls(out) == []
    text = screen_text(out)
    assert "\\u009B31m" in text and "\\u202Egnp.exe" in text and "\\u007F" in text
    # the same JSON value as agentboxd's, only spelled with more escapes
    task = json.loads(text)
    assert task["metadata"] == {"note": HOSTILE}
    assert task["progress"] == progress()
    assert task["command"] == daemon.task(hostile)["command"]


def signal_the_waiting_task():
    """SIGUSR1 to the sandboxed WRITE that waits for it (found by its argv)."""
    for pid in helpers.sandbox_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"python3", b"-c"] and len(argv) > 5 and argv[5] == b"sigusr1":
            os.kill(pid, signal.SIGUSR1)
            return True
    return False


def test_wait_live_line_and_final_json_escape_task_text(daemon):
    # the task runs until the live line is on the terminal (then the test
    # ends it): wait sees it running however long anything here takes
    tid = daemon.submit(command=task_command(b"x\n", sleep="sigusr1"), metadata={"note": HOSTILE})
    deadline = time.monotonic() + 30
    while daemon.task(tid)["progress"] != progress():  # the live line has something to show
        assert time.monotonic() < deadline, daemon.task(tid)
        time.sleep(0.1)
    released = []

    def release(out):
        if not released and b"running  attempt 1  " in out:
            released.append(signal_the_waiting_task())

    rc, out, _ = on_tty("wait", *sock(daemon), tid, on_output=release)
    assert released == [True], out
    assert rc == 0, out
    assert raw_controls(out) == []
    text = screen_text(out)
    live = [line for line in text.split("\n") if line.startswith("running  attempt 1  ")]
    assert live, text
    assert "\\x1b]0;pwned\\x1b\\\\ \\x1b[2J \\u009b31m \\u202egnp.exe \\x7f" in live[-1]
    assert "\\u202ekey=x\\u009by" in live[-1]
    final = json.loads(text[text.index("{"):])
    assert final["status"] == "succeeded" and final["progress"] == progress()


def test_ps_escapes_progress_and_command(daemon, hostile):
    short = daemon.submit(command=["sh", "-c", "exit 0", f"{ESC}[31mred", "\u202eevil", "\u009bX"])
    daemon.wait_all([short], timeout=60)
    rc, out, _ = on_tty("ps", *sock(daemon), "--all")
    assert rc == 0, out
    assert raw_controls(out) == []
    rows = {line.split(" ")[0]: line for line in screen_text(out).split("\n")}
    assert "  stage=\\x1b]0;pwned\\x1b\\\\ ...  " in rows[hostile], rows[hostile]
    assert rows[short].endswith("  sh -c 'exit 0' \\x1b[31mred \\u202eevil \\u009bX"), rows[short]


# ---- logs --------------------------------------------------------------------

def test_logs_on_a_terminal_escapes_the_output(daemon, hostile):
    rc, out, _ = on_tty("logs", *sock(daemon), hostile)
    assert rc == 0, out
    assert raw_controls(out) == []
    text = screen_text(out)
    for seen in ("plain line\n", "\\x1b]0;pwned\\x1b\\\\ title \\x1b[2J cleared\n",
                 "\\x9b raw c1 byte\n", "\\u009b utf8 c1\n", "\\u202e rlo\n", "tab\tend\n",
                 "cr\\rhidden\n", "back\\\\slash\n", "\\xff invalid\n"):
        assert seen in text, (seen, text)
    # one attempt: agentboxd wrote no header, so the task's is not marked as one
    assert MARK_ON not in out
    assert "\n[agentbox: attempt 2]\n" in text
    _, _, err = on_tty("logs", *sock(daemon), hostile, stderr_tty=False)
    assert b"not marked" in err


def test_logs_marks_real_headers_and_not_a_forged_one(daemon):
    # the last attempt forges the header of an earlier one
    forged = (f"three {ESC}[2J\n[agentbox: attempt 2]\n" + "\u202e\n").encode()
    tid = attempts_task(daemon, [b"one\n", b"two", forged])
    rc, out, _ = on_tty("logs", *sock(daemon), tid)
    assert rc == 0, out
    assert raw_controls(out) == []
    out = out.replace(b"\r\n", b"\n")
    assert out.startswith(MARK_ON + b"[agentbox: attempt 1]" + MARK_OFF + b"\none\n"
                          + MARK_ON + b"[agentbox: attempt 2]" + MARK_OFF + b"\ntwo\n"
                          + MARK_ON + b"[agentbox: attempt 3]" + MARK_OFF + b"\nthree \\x1b[2J\n"
                          + b"[agentbox: attempt 2]\n\\u202e\n"), out
    assert out.count(MARK_ON) == 3


def test_logs_does_not_mark_a_header_it_cannot_tell_from_a_forged_one(daemon):
    # attempt 1 forges the header of attempt 2: two lines read
    # "[agentbox: attempt 2]", and the bytes cannot say which is agentboxd's
    tid = attempts_task(daemon, [b"one\n[agentbox: attempt 2]\nstill one\n", b"two\n"])
    rc, out, err = on_tty("logs", *sock(daemon), tid, stderr_tty=False)
    assert rc == 0, out
    assert raw_controls(out) == []
    out = out.replace(b"\r\n", b"\n")
    assert out == (MARK_ON + b"[agentbox: attempt 1]" + MARK_OFF + b"\none\n"
                   b"[agentbox: attempt 2]\nstill one\n[agentbox: attempt 2]\ntwo\n"), out
    assert b"2 lines" in err and b"not marked" in err


def test_logs_exact_bytes_off_a_terminal_and_with_raw(daemon, hostile):
    piped = subprocess.run([AGENTBOX, "logs", *sock(daemon), hostile], capture_output=True)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == OUTPUT
    raw_pipe = subprocess.run([AGENTBOX, "logs", "--raw", *sock(daemon), hostile],
                              capture_output=True)
    assert raw_pipe.returncode == 0, raw_pipe.stderr
    assert raw_pipe.stdout == OUTPUT
    rc, out, err = on_tty("logs", "--raw", *sock(daemon), hostile, raw=True, stderr_tty=False)
    assert rc == 0, err
    assert out == OUTPUT


def test_logs_follow_on_a_terminal_escapes_and_raw_passes(daemon):
    tid = daemon.submit(command=task_command(OUTPUT, sleep=2))
    rc, out, _ = on_tty("logs", "-f", *sock(daemon), tid)
    assert rc == 0, out
    assert raw_controls(out) == []
    text = screen_text(out)
    assert "\\u202e rlo\n" in text and "\\x9b raw c1 byte\n" in text
    assert MARK_ON not in out
    tid = daemon.submit(command=task_command(OUTPUT, sleep=1))
    rc, out, err = on_tty("logs", "-f", "--raw", *sock(daemon), tid, raw=True, stderr_tty=False)
    assert rc == 0, err
    assert out == OUTPUT


# ---- sandboxes and error messages --------------------------------------------

def test_sandbox_json_and_error_messages_escape_sandbox_text(daemon):
    sid = daemon.create_sandbox(metadata={"note": HOSTILE})
    try:
        rc, out, _ = on_tty("sandbox", "inspect", *sock(daemon), sid)
        assert rc == 0, out
        assert raw_controls(out) == []
        assert json.loads(screen_text(out))["metadata"] == {"note": HOSTILE}
        rc, out, _ = on_tty("sandbox", "ls", "--json", *sock(daemon))
        assert rc == 0, out
        assert raw_controls(out) == []
        listed = json.loads(screen_text(out))
        assert [s["metadata"] for s in listed if s["id"] == sid] == [{"note": HOSTILE}]
        # a name the sandbox made, quoted back in agentboxd's error message
        name = "/workspace/\u202egnp.exe\u009b"
        daemon.exec(sid, ["mkdir", name])
        rc, out, _ = on_tty("cp", *sock(daemon), f"{sid}:{name}", "-")
        assert rc == 125, out
        assert raw_controls(out) == []
        text = screen_text(out)
        assert text.startswith("agentbox: cp: ") and "\\u202egnp.exe\\u009b" in text, text
    finally:
        daemon.request("DELETE", f"/v1/sandboxes/{sid}")
