"""A fake internet in network namespaces, for the network tests and
bench/network. No packet leaves it:

    netns "host" (agentboxd runs here)        netns "inet" (the fake internet)
    up-h 198.51.100.2/24  <───── veth ─────>  up-i 198.51.100.1/24
    default via 198.51.100.1                  lo: 203.0.113.10 (thirty web sites),
                                                  203.0.113.20 (forbidden.test),
                                                  203.0.113.30 (api.secret.test),
                                                  169.254.169.254 (metadata),
                                                  10.77.0.1 (RFC 1918), 100.64.0.1 (CGNAT)

"inet" has no link but lo and up-i and no default route, and "host" routes
only into "inet": World.build() checks that before anything starts. Its
servers log one JSON line per thing that reached them (World.seen()).
"""
import json
import os
import re
import subprocess
import sys
import time

SITE = "203.0.113.10"
REFUSED = {"metadata": "169.254.169.254", "rfc1918": "10.77.0.1", "cgnat": "100.64.0.1",
           "host": "198.51.100.2"}
CURL = ["curl", "-s", "-S", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}"]
BIG = "/big"  # a large download, of World(big_mib=...) MiB


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True).stdout


# The fake internet's servers: HTTP on every address of "inet" (port 80),
# HTTPS (443, a certificate for *.test), a UDP canary (9999), and DNS for
# NAMES on 198.51.100.1:53. Each logs one JSON line per thing that reached it
# (with its Authorization header, if any); a path under /echo answers with
# that header in its body, as a careless API might.
NAMES = {**{f"site{i}.test": ["203.0.113.10"] for i in range(1, 31)},
         "forbidden.test": ["203.0.113.20"], "api.secret.test": ["203.0.113.30"],
         "rebind.test": ["10.77.0.1"], "meta.test": ["169.254.169.254"],
         "mixed.test": ["10.77.0.1", "203.0.113.10"]}
SERVER = r"""
import http.server, json, socket, ssl, struct, sys, threading, time
log = open(sys.argv[1], "a", buffering=1)
names = json.loads(sys.argv[4])
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 9999))
    while True:
        data, peer = s.recvfrom(2048)
        log.write(json.dumps({"udp": data.decode(errors="replace"), "from": peer[0]}) + "\n")
def sink():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 9998))
    s.listen(16)
    while True:
        c, peer = s.accept()
        n, first = 0, None
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            first = first or time.monotonic()
            n += len(b)
        log.write(json.dumps({"sink": n, "secs": time.monotonic() - (first or time.monotonic()),
                              "from": peer[0]}) + "\n")
        c.close()
def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("198.51.100.1", 53))
    while True:
        q, peer = s.recvfrom(2048)
        i, labels = 12, []
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode())
            i += 1 + q[i]
        qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
        name = ".".join(labels).lower()
        log.write(json.dumps({"dns": name, "type": qtype, "from": peer[0]}) + "\n")
        addrs = names.get(name)
        question = q[12:i + 5]
        answers = [b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + socket.inet_aton(a)
                   for a in (addrs or []) if qtype == 1]
        flags = 0x8180 if addrs is not None else 0x8183
        s.sendto(q[:2] + struct.pack(">HHHHH", flags, 1, len(answers), 0, 0) + question
                 + b"".join(answers), peer)
big = int(sys.argv[5]) << 20
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/big"):
            self.send_response(200)
            self.send_header("Content-Length", str(big))
            self.end_headers()
            chunk = bytes(1 << 20)
            for _ in range(big >> 20):
                self.wfile.write(chunk)
            return
        tls = isinstance(self.connection, ssl.SSLSocket)
        entry = {"https" if tls else "http": self.path, "host": self.headers.get("Host"),
                 "from": self.client_address[0]}
        if tls:
            entry["sni"] = getattr(self.connection, "sni", None)
        auth = self.headers.get("Authorization")
        if auth is not None:
            entry["authorization"] = auth
        log.write(json.dumps(entry) + "\n")
        body = b"page " + self.path.encode() + b"\n"
        if self.path.startswith("/echo"):  # a server that echoes a secret back
            body += b"you sent: " + (auth or "").encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
def https():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[2], sys.argv[3])
    def sni(sock, name, _):
        sock.sni = name
    ctx.sni_callback = sni
    srv = http.server.ThreadingHTTPServer(("0.0.0.0", 443), H)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()
for f in (udp, sink, dns, https):
    threading.Thread(target=f, daemon=True).start()
http.server.ThreadingHTTPServer(("0.0.0.0", 80), H).serve_forever()
"""


class World:
    def __init__(self, tmp, big_mib=1):
        tag = f"abx{os.getpid() % 100000}"
        self.host, self.inet = f"{tag}h", f"{tag}i"
        self.dir = tmp
        self.big_mib = big_mib
        self.log = tmp / "inet.log"
        self.log.write_text("")
        self.server = None

    def netns(self, name):
        return ["nsenter", f"--net=/run/netns/{name}"]

    def build(self):
        h, i = self.host, self.inet
        ip("netns", "add", h)
        ip("netns", "add", i)
        ip("link", "add", "up-h", "netns", h, "type", "veth", "peer", "name", "up-i", "netns", i)
        for ns, dev, addr in ((h, "up-h", "198.51.100.2/24"), (i, "up-i", "198.51.100.1/24")):
            ip("-n", ns, "addr", "add", addr, "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", h, "route", "add", "default", "via", "198.51.100.1")
        for a in (SITE, "203.0.113.20", "203.0.113.30",
                  *[v for k, v in REFUSED.items() if k != "host"]):
            ip("-n", i, "addr", "add", f"{a}/32", "dev", "lo")
        self.check_sealed()
        cert, key = self.dir / "cert.pem", self.dir / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=fake internet",
                        # OpenSSL matches no wildcard of one label: api.secret.test by name
                        "-addext", "subjectAltName=DNS:*.test,DNS:api.secret.test",
                        "-keyout", str(key), "-out", str(cert)], check=True,
                       capture_output=True)
        self.server = subprocess.Popen([*self.netns(i), sys.executable, "-c", SERVER,
                                        str(self.log), str(cert), str(key), json.dumps(NAMES),
                                        str(self.big_mib)])
        deadline = time.monotonic() + 10
        while not self.reachable():
            assert time.monotonic() < deadline, "the fake internet's servers did not start"
            time.sleep(0.05)

    def check_sealed(self):
        """No route out of the world: inet has only lo and up-i and no default route."""
        links = re.findall(r"^\d+: ([^:@]+)", ip("-n", self.inet, "-o", "link"), re.M)
        assert sorted(links) == ["lo", "up-i"], links
        assert "default" not in ip("-n", self.inet, "route")
        links = re.findall(r"^\d+: ([^:@]+)", ip("-n", self.host, "-o", "link"), re.M)
        assert sorted(links) == ["lo", "up-h"], links
        assert ip("-n", self.host, "route").splitlines()[0].startswith(
            "default via 198.51.100.1 dev up-h")

    def reachable(self):
        r = subprocess.run([*self.netns(self.host), *CURL, f"http://{SITE}/ready"],
                           capture_output=True, text=True)
        return r.stdout == "200"

    def seen(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def destroy(self):
        if self.server:
            self.server.kill()
            self.server.wait()
        for ns in (self.host, self.inet):
            ip("netns", "del", ns, check=False)

    def host_links(self):
        return re.findall(r"^\d+: (ab[oap]\d+)", ip("-n", self.host, "-o", "link"), re.M)

    def tables(self):
        return subprocess.run([*self.netns(self.host), "nft", "list", "tables"], check=True,
                              capture_output=True, text=True).stdout


