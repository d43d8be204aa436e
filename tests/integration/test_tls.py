"""TLS on agentboxd's TCP listener (--tls-cert, --tls-key) and the CLI's https
(AGENTBOX_URL, --cacert, AGENTBOX_CACERT), against the real daemon: a CA, a
certificate for 127.0.0.1 and one for another name are made here with the
`openssl` command. Tasks, their streams, sandboxes, exec and files go over
TLS; an unknown CA, a wrong name, plain HTTP and TLS 1.1 are refused; the
options' mistakes end agentboxd with its documented status; a client that
never finishes its handshake is dropped by the header timeout. Every packet
stays on loopback: the one daemon bound to 0.0.0.0 is spoken to over
127.0.0.1 alone.
"""
import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest

import helpers
from conftest import BUILD
from daemon import AGENTBOXD, Daemon

AGENTBOX = os.path.join(BUILD, "src", "cli", "agentbox")
HEADER_TIMEOUT_S = 10  # DAEMON_HEADER_TIMEOUT_S (src/daemon/daemon.h)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (agentboxd)"),
    pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl command"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def leaf(d, name, san):
    """A key and a certificate for san, signed by d's CA."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
            cwd=d)
    os.chmod(d / f"{name}.key", 0o600)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=agentbox test CA",
            cwd=d)
    leaf(d, "server", "IP:127.0.0.1")
    leaf(d, "wrong", "DNS:agentboxd.invalid")
    return d


def tls_daemon(tmp_path, pki, name="server", listen="127.0.0.1", *more):
    tmp_path.mkdir(parents=True, exist_ok=True)
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"{listen}:{port}", "--tls-cert", str(pki / f"{name}.pem"),
               "--tls-key", str(pki / f"{name}.key"), *more)
    d.port = port
    return d.start()


def cli(*args, url, key=None, env=None, timeout=60):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("AGENTBOX_") and not k.startswith("SSL_CERT_")}
    e["AGENTBOX_URL"] = url
    if key:
        e["AGENTBOX_KEY"] = key
    e.update(env or {})
    return subprocess.run([AGENTBOX, *args], capture_output=True, text=True, env=e,
                          timeout=timeout)


def test_the_cli_works_over_tls(tmp_path, pki):
    d = tls_daemon(tmp_path, pki)
    try:
        url, key, ca = f"https://127.0.0.1:{d.port}", d.admin_key(), str(pki / "ca.pem")

        def ok(*args, **kw):
            p = cli("--cacert", ca, *args, url=url, key=key, **kw)
            assert p.returncode == 0, (args, p.stderr)
            return p.stdout
        assert "role admin" in ok("whoami")
        # a task, its output followed as it comes (a stream), its events (wait)
        tid = ok("submit", "--", "sh", "-c", "echo one; sleep 0.5; echo two").strip()
        out = ok("logs", "-f", tid)
        assert "one\n" in out and "two\n" in out
        assert '"succeeded"' in ok("wait", tid)
        # a sandbox: exec, a file up and down (streamed bodies both ways)
        sid = ok("sandbox", "create").strip()
        try:
            assert ok("exec", sid, "--", "sh", "-c", "echo hi; echo oops >&2") == "hi\n"
            blob = os.urandom(3 << 20)
            (tmp_path / "up").write_bytes(blob)
            ok("cp", str(tmp_path / "up"), f"{sid}:/tmp/blob")
            ok("cp", f"{sid}:/tmp/blob", str(tmp_path / "down"))
            assert (tmp_path / "down").read_bytes() == blob
        finally:
            ok("sandbox", "rm", sid)
        # the CA from the environment, and the system's store's paths (which a
        # static OpenSSL reads too): SSL_CERT_FILE names it
        for env in ({"AGENTBOX_CACERT": ca}, {"SSL_CERT_FILE": ca}):
            p = cli("whoami", url=url, key=key, env=env)
            assert p.returncode == 0, (env, p.stderr)
        # --cacert with a transport that is not TLS is a mistake, said before connecting
        p = cli("--cacert", ca, "whoami", url=f"http://127.0.0.1:{d.port}", key=key)
        assert p.returncode == 125 and "--cacert is for an https://" in p.stderr
    finally:
        d.stop()


def test_unverified_servers_are_refused(tmp_path, pki):
    d = tls_daemon(tmp_path / "a", pki)
    w = tls_daemon(tmp_path / "b", pki, "wrong")
    try:
        key, ca = d.admin_key(), str(pki / "ca.pem")
        # no --cacert: the system's store does not know our CA
        p = cli("whoami", url=f"https://127.0.0.1:{d.port}", key=key)
        assert p.returncode == 125, p.stderr
        assert "did not verify: unable to get local issuer certificate" in p.stderr
        assert "--cacert" in p.stderr
        # a CA that did not sign it
        p = cli("--cacert", str(pki / "wrong.pem"), "whoami", url=f"https://127.0.0.1:{d.port}",
                key=key)
        assert p.returncode == 125 and "did not verify" in p.stderr, p.stderr
        # our CA, but a certificate for another name
        p = cli("--cacert", ca, "whoami", url=f"https://127.0.0.1:{w.port}", key=key)
        assert p.returncode == 125 and "IP address mismatch" in p.stderr, p.stderr
        # the right certificate, asked for by a name it does not carry
        p = cli("--cacert", ca, "whoami", url=f"https://localhost:{d.port}", key=key)
        assert p.returncode == 125 and "hostname mismatch" in p.stderr, p.stderr
    finally:
        d.stop()
        w.stop()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # ssl.TLSVersion.TLSv1_1, on purpose
def test_plain_http_and_old_tls_get_no_answer(tmp_path, pki):
    d = tls_daemon(tmp_path, pki)
    try:
        key = d.admin_key()
        # plain HTTP to the TLS port: no HTTP answer, from the CLI or a raw socket
        p = cli("whoami", url=f"http://127.0.0.1:{d.port}", key=key)
        assert p.returncode == 125 and "role" not in p.stdout
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
            s.sendall(f"GET /v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                      "Connection: close\r\n\r\n".encode())
            got = b""
            s.settimeout(HEADER_TIMEOUT_S + 10)
            try:
                while chunk := s.recv(4096):
                    got += chunk
            except (ConnectionResetError, socket.timeout):
                pass
            assert b"HTTP/1." not in got and b"tenant" not in got
        # TLS 1.1 and 1.0 are refused by the server (the client offers them: the
        # failure is the server's end of the connection, not "no protocols")
        for old in (ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(pki / "ca.pem")
            ctx.minimum_version, ctx.maximum_version = ssl.TLSVersion.TLSv1, old
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                with pytest.raises((ssl.SSLError, ConnectionResetError)) as e:
                    ctx.wrap_socket(s, server_hostname="127.0.0.1")
                assert "NO_PROTOCOLS_AVAILABLE" not in str(e.value)
        # and 1.2 and 1.3 are served
        for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(pki / "ca.pem")
            ctx.minimum_version = ctx.maximum_version = v
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                    assert t.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                           ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
    finally:
        d.stop()


def test_a_silent_handshake_is_dropped(tmp_path, pki):
    """A client that connects and sends nothing, or half a ClientHello, holds a
    thread: the header timeout ends it."""
    d = tls_daemon(tmp_path, pki)
    try:
        for first in (b"", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"):
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                s.sendall(first)
                t0 = time.monotonic()
                _, ended = helpers.read_until_closed(s, HEADER_TIMEOUT_S + 15)
                took = time.monotonic() - t0
            assert ended, f"still open after {took:.1f} s"
            assert took >= HEADER_TIMEOUT_S - 2, f"dropped after {took:.1f} s"
        # and the daemon still serves
        ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                t.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                assert t.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        d.stop()


def agentboxd(tmp_path, *args, timeout=60):
    return subprocess.run([AGENTBOXD, "--socket", str(tmp_path / "s.sock"), "--state-dir",
                           str(tmp_path / "state"), "--pool", "0", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_tls_options_and_their_exit_statuses(tmp_path, pki):
    cert, key = str(pki / "server.pem"), str(pki / "server.key")
    listen = f"127.0.0.1:{free_port()}"
    (tmp_path / "notpem").write_text("hello\n")
    cases = [
        (("--listen", listen, "--tls-cert", cert), 2, "--tls-cert needs --tls-key"),
        (("--listen", listen, "--tls-key", key), 2, "--tls-key needs --tls-cert"),
        (("--tls-cert", cert, "--tls-key", key), 2, "are for --listen"),
        (("--listen", listen, "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", key), 2,
         "--tls-cert " + str(tmp_path / "nope.pem") + ": No such file"),
        (("--listen", listen, "--tls-cert", cert, "--tls-key", str(tmp_path)), 2,
         "not a regular file"),
        (("--listen", listen, "--tls-cert", str(tmp_path / "notpem"), "--tls-key", key), 2,
         "not a PEM file"),
        (("--listen", listen, "--tls-cert", cert, "--tls-key", cert), 2, "holds no private key"),
        # without TLS, any address but loopback still needs --insecure-listen
        (("--listen", f"0.0.0.0:{free_port()}"), 2, "not a loopback address, and no TLS"),
        # a key that is not the certificate's: libmicrohttpd refuses it at the start
        (("--listen", listen, "--tls-cert", cert, "--tls-key", str(pki / "wrong.key")), 1,
         "cannot start the HTTPS server"),
    ]
    for args, status, says in cases:
        p = agentboxd(tmp_path, *args)
        assert p.returncode == status, (args, p.returncode, p.stderr)
        assert says in p.stderr, (args, p.stderr)


def test_any_address_with_tls_needs_no_insecure_listen(tmp_path, pki):
    """0.0.0.0 with TLS starts without --insecure-listen (spoken to over 127.0.0.1
    only); a key file others may read is warned about; the key's PEM text is gone
    from the daemon's memory once GnuTLS has it."""
    exposed = tmp_path / "exposed.key"
    shutil.copy(pki / "server.key", exposed)
    os.chmod(exposed, 0o644)
    port = free_port()
    d = Daemon(tmp_path, "--listen", f"0.0.0.0:{port}", "--tls-cert", str(pki / "server.pem"),
               "--tls-key", str(exposed))
    d.start()
    try:
        p = cli("--cacert", str(pki / "ca.pem"), "whoami", url=f"https://127.0.0.1:{port}",
                key=d.admin_key())
        assert p.returncode == 0, p.stderr
        log = (tmp_path / "agentboxd.log").read_text()
        assert "warning: --tls-key " + str(exposed) + " is mode 0644" in log
        assert "and https:0.0.0.0:" in log
        # agentboxd's own copy of the key file was zeroed; GnuTLS keeps the key
        # it parsed (it signs with it), not the file's text with its armour.
        # (The last line: malloc reuses the first bytes of a freed buffer.)
        header = b"-----END PRIVATE KEY-----"
        assert header in exposed.read_bytes()
        with open(f"/proc/{d.proc.pid}/maps") as maps, \
                open(f"/proc/{d.proc.pid}/mem", "rb") as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if "rw" not in perms:
                    continue
                lo, hi = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(lo)
                    data = mem.read(hi - lo)
                except OSError:
                    continue
                assert header not in data, line
    finally:
        d.stop()


def test_a_listener_that_cannot_bind_is_a_clean_exit(tmp_path):
    """--listen on a port another socket holds: agentboxd says so and exits
    1, every time, after its scheduler's thread has started (and is joined
    first: the thread reads what main() owns, so returning without it was
    a crash, SIGSEGV, whenever the thread woke after main's frame was
    gone)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        for i in range(10):
            state = tmp_path / f"state{i}"
            p = subprocess.run([AGENTBOXD, "--socket", str(tmp_path / f"s{i}.sock"),
                                "--state-dir", str(state), "--pool", "0",
                                "--listen", f"127.0.0.1:{port}"],
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 1, (i, p.returncode, p.stderr)
            assert "Address already in use" in p.stderr, p.stderr
            assert not (tmp_path / f"s{i}.sock").exists()
