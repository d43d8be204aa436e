"""`agentbox image pull` against Debian's real `docker-registry` (docs/images.md,
"Pull"), on loopback, with TLS from a CA the test makes:

- one registry with htpasswd (Basic) auth;
- one with token auth (Bearer) against a token service the test runs
  (https, a JWT signed RS256 with a key whose certificate is the
  registry's rootcertbundle, sent in its x5c header);

images the test builds itself (a few files; a multi-arch index with a fake
arm64 image; a zstd layer) pushed there with skopeo. Pulls work through both
kinds of auth; an index gives linux/amd64; wrong credentials, an unknown
tag, an untrusted certificate and a corrupted blob are refused with their
errors, and leave nothing in images/tmp or blobs.
"""
import base64
import hashlib
import http.server
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
import urllib.parse

import pytest

from conftest import AGENTBOX
from daemon import Daemon

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (image trees are chowned)"),
    pytest.mark.skipif(not (shutil.which("docker-registry") and shutil.which("skopeo")
                            and shutil.which("htpasswd")),
                       reason="docker-registry, skopeo and htpasswd (apache2-utils) are "
                              "needed (scripts/install-deps)"),
]

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
except ImportError:  # pragma: no cover
    x509 = None

REGISTRY_START_S = 30
SERVICE = "agentbox-test-registry"
ISSUER = "agentbox-test-issuer"
USERS = {"alice": "alice-pw", "bob": "bob-pw"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and localhost, a token signing cert."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=agentbox test CA", "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=agentbox test token signer", "-keyout", "token.key", "-out", "token.crt",
            cwd=d)
    certs = d / "certs.d"  # skopeo's --dest-cert-dir
    certs.mkdir()
    shutil.copy(d / "ca.crt", certs / "ca.crt")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """https GET /token?service=&scope=: a JWT for the scope, to alice or bob (Basic)."""

    def __init__(self, pki):
        self.key = serialization.load_pem_private_key((pki / "token.key").read_bytes(), None)
        cert = x509.load_pem_x509_certificate((pki / "token.crt").read_bytes())
        self.x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.asked = []  # (user or None, scope) of every request
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(url.query)
                user = None
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    u, _, p = base64.b64decode(auth[6:]).decode().partition(":")
                    if USERS.get(u) != p:
                        return self.answer(401, {"details": "bad credentials"})
                    user = u
                service.asked.append((user, q.get("scope", [""])[0]))
                if url.path != "/token" or q.get("service") != [SERVICE]:
                    return self.answer(400, {"details": "bad request"})
                if user is None:
                    return self.answer(401, {"details": "anonymous access is refused"})
                access = []
                for scope in q.get("scope", []):
                    kind, _, rest = scope.partition(":")
                    name, _, actions = rest.rpartition(":")
                    access.append({"type": kind, "name": name,
                                   "actions": actions.split(",")})
                self.answer(200, {"token": service.jwt(user, access)})

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jwt(self, user, access):
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}
        claims = {"iss": ISSUER, "sub": user, "aud": SERVICE, "exp": now + 600,
                  "nbf": now - 10, "iat": now, "jti": os.urandom(8).hex(), "access": access}
        signing = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        sig = self.key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing + "." + b64url(sig)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Registry:
    """docker-registry serve on 127.0.0.1 with TLS; auth: htpasswd or token."""

    def __init__(self, d, pki, auth):
        self.port = free_port()
        self.storage = d / "storage"
        config = {
            "version": "0.1",
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.storage)}},
            "http": {"addr": f"127.0.0.1:{self.port}", "secret": "agentbox-test",
                     "tls": {"certificate": str(pki / "server.crt"),
                             "key": str(pki / "server.key")}},
            "auth": auth,
        }
        (d / "config.yml").write_text(json.dumps(config))  # YAML takes JSON
        self.log = open(d / "registry.log", "wb")
        self.proc = subprocess.Popen(["docker-registry", "serve", str(d / "config.yml")],
                                     stdout=self.log, stderr=self.log)
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        deadline = time.monotonic() + REGISTRY_START_S
        while True:
            assert self.proc.poll() is None, (d / "registry.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    with ctx.wrap_socket(s, server_hostname="127.0.0.1"):
                        return
            except OSError:
                assert time.monotonic() < deadline, "docker-registry did not start"
                time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


# ---- images the test makes -------------------------------------------------------

def tar_bytes(files):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def sha(data):
    return hashlib.sha256(data).hexdigest()


def put_blob(layout, data):
    (layout / "blobs" / "sha256" / sha(data)).write_bytes(data)
    return sha(data)


def image_manifest(layout, who, arch="amd64"):
    """An image's layer, config and manifest in layout; the manifest's bytes."""
    lay = tar_bytes({"etc": None, "etc/who": f"{who}\n".encode(),
                     "etc/arch": f"{arch}\n".encode()})
    cfg = json.dumps({
        "architecture": arch, "os": "linux", "created": "2024-05-01T12:00:00Z",
        "config": {"Env": [f"WHO={who}"], "Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{sha(lay)}"]},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": f"sha256:{put_blob(layout, cfg)}", "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": f"sha256:{put_blob(layout, lay)}", "size": len(lay)}],
    }).encode()
    put_blob(layout, manifest)
    return manifest


def oci_layout(d, who, multi=False):
    """An OCI layout at d tagged "1": one image, or an index of amd64 and a fake arm64."""
    (d / "blobs" / "sha256").mkdir(parents=True)
    (d / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    amd64 = image_manifest(d, who)
    top = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
           "digest": f"sha256:{sha(amd64)}", "size": len(amd64)}
    if multi:
        arm64 = image_manifest(d, who + "-arm64", arch="arm64")
        # arm64 first: the amd64 one is chosen, not the first
        index = json.dumps({"schemaVersion": 2,
                            "mediaType": "application/vnd.oci.image.index.v1+json",
                            "manifests": [
                                {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                 "digest": f"sha256:{sha(arm64)}", "size": len(arm64),
                                 "platform": {"os": "linux", "architecture": "arm64"}},
                                {**top, "platform": {"os": "linux", "architecture": "amd64"}},
                            ]}).encode()
        top = {"mediaType": "application/vnd.oci.image.index.v1+json",
               "digest": f"sha256:{put_blob(d, index)}", "size": len(index)}
    top["annotations"] = {"org.opencontainers.image.ref.name": "1"}
    (d / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return d


def push(layout, dest, creds, certs, *extra):
    subprocess.run(["skopeo", "copy", "-q", "--dest-creds", creds, "--dest-cert-dir",
                    str(certs), *extra, f"oci:{layout}:1", f"docker://{dest}"],
                   check=True, capture_output=True, timeout=120)


# ---- fixtures ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    if x509 is None:
        pytest.skip("python3-cryptography is needed (scripts/install-deps)")
    base = tmp_path_factory.mktemp("pull")
    pki = base / "pki"
    pki.mkdir()
    make_pki(pki)
    htpasswd = base / "htpasswd"
    subprocess.run(["htpasswd", "-Bbc", str(htpasswd), "alice", USERS["alice"]], check=True,
                   capture_output=True)
    tokens = TokenService(pki)
    (base / "basic").mkdir()
    (base / "token").mkdir()
    basic = Registry(base / "basic", pki, {"htpasswd": {"realm": "agentbox-test",
                                                         "path": str(htpasswd)}})
    token = Registry(base / "token", pki, {"token": {
        "realm": f"https://127.0.0.1:{tokens.port}/token", "service": SERVICE,
        "issuer": ISSUER, "rootcertbundle": str(pki / "token.crt")}})
    b, t = f"127.0.0.1:{basic.port}", f"127.0.0.1:{token.port}"
    certs = pki / "certs.d"
    push(oci_layout(base / "img-basic", "basic"), f"{b}/it/basic:1", "alice:alice-pw", certs)
    push(oci_layout(base / "img-corrupt", "corrupt"), f"{b}/it/corrupt:1", "alice:alice-pw",
         certs)
    push(oci_layout(base / "img-multi", "multi", multi=True), f"{b}/it/multi:1",
         "alice:alice-pw", certs, "--all")
    push(oci_layout(base / "img-zstd", "zstd"), f"{b}/it/zstd:1", "alice:alice-pw", certs,
         "--format", "oci", "--dest-compress", "--dest-compress-format", "zstd")
    push(oci_layout(base / "img-token", "token"), f"{t}/it/token:1", "bob:bob-pw", certs)
    config = base / "registries.json"
    config.write_text(json.dumps({"registries": {
        b: {"username": "alice", "password": USERS["alice"], "cacert": str(pki / "ca.crt")},
        t: {"username": "bob", "password": USERS["bob"], "cacert": str(pki / "ca.crt")},
        # the same registry by another name: the CA, but a wrong password
        f"localhost:{basic.port}": {"username": "alice", "password": "not-alice-pw",
                                    "cacert": str(pki / "ca.crt")},
        # localhost:<token port> is not configured: no CA of ours, no credentials
    }}))
    os.chmod(config, 0o600)
    d = Daemon(base, "--registry-config", str(config)).start()
    yield {"d": d, "basic": basic, "token": token, "tokens": tokens, "b": b, "t": t,
           "base": base}
    d.stop()
    basic.stop()
    token.stop()
    tokens.stop()


def pull(env, *args, check=True):
    proc = subprocess.run([AGENTBOX, "image", "pull", *args, "--socket", env["d"].socket],
                          capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def entries(env, sub):
    return sorted(os.listdir(env["d"].state / "images" / sub))


def tree_file(env, ref, path):
    status, image = env["d"].request("GET", f"/v1/images/{ref}")
    assert status == 200, image
    hex_ = image["config_digest"].split(":")[1]
    return (env["d"].state / "images" / "trees" / hex_ / path).read_text()


def refused(env, ref, code, says, name=None):
    """A pull of ref refused with code, its message saying says; nothing left of it."""
    blobs = entries(env, "blobs/sha256")
    trees = entries(env, "trees")
    status, body = env["d"].request("POST", "/v1/images/pull",
                                    {"ref": ref, **({"name": name} if name else {})},
                                    timeout=120)
    assert status == {"not_found": 404, "registry_error": 502,
                      "invalid_field": 400}[code], body
    assert body["error"]["code"] == code, body
    assert says in body["error"]["message"], body
    assert entries(env, "tmp") == []
    assert entries(env, "blobs/sha256") == blobs
    assert entries(env, "trees") == trees
    return body["error"]


# ---- tests -----------------------------------------------------------------------------

def test_pull_with_basic_auth(env):
    ref = f"{env['b']}/it/basic:1"
    assert pull(env, ref).stdout.strip() == ref
    assert tree_file(env, ref, "etc/who") == "basic\n"
    status, image = env["d"].request("GET", f"/v1/images/{ref}")
    assert image["config"]["env"] == ["WHO=basic"]
    assert image["config"]["architecture"] == "amd64"
    assert entries(env, "tmp") == []
    # again, under another name: its blobs are the store's already (linked, not fetched)
    shown = json.loads(pull(env, ref, "--name", "again:2", "--json").stdout)
    assert shown["name"] == "again:2" and shown["digest"] == image["digest"]
    assert entries(env, "tmp") == []


def test_pull_with_bearer_tokens(env):
    asked = len(env["tokens"].asked)
    ref = f"{env['t']}/it/token:1"
    shown = json.loads(pull(env, ref, "--json").stdout)
    assert shown["name"] == ref
    assert tree_file(env, ref, "etc/who") == "token\n"
    # the token was asked for with bob's credentials, for the repository's pull scope
    assert ("bob", "repository:it/token:pull") in env["tokens"].asked[asked:]


def test_multi_arch_index_gives_amd64(env):
    ref = f"{env['b']}/it/multi:1"
    pull(env, ref)
    assert tree_file(env, ref, "etc/arch") == "amd64\n"
    assert tree_file(env, ref, "etc/who") == "multi\n"


def test_zstd_layer(env):
    ref = f"{env['b']}/it/zstd:1"
    pull(env, ref)
    status, image = env["d"].request("GET", f"/v1/images/{ref}")
    assert [l["media_type"] for l in image["layers"]] == \
        ["application/vnd.oci.image.layer.v1.tar+zstd"]
    assert tree_file(env, ref, "etc/who") == "zstd\n"


def test_pull_by_digest(env):
    ref = f"{env['b']}/it/basic:1"
    status, image = env["d"].request("GET", f"/v1/images/{ref}")
    if status != 200:
        pull(env, ref)
        status, image = env["d"].request("GET", f"/v1/images/{ref}")
    out = pull(env, f"{env['b']}/it/basic@{image['digest']}", "--name", "bydigest:1")
    assert out.stdout.strip() == "bydigest:1"


def test_wrong_credentials_refused(env):
    port = env["basic"].port
    err = refused(env, f"localhost:{port}/it/basic:1", "registry_error",
                  "refused the credentials")
    assert "not-alice-pw" not in err["message"]
    proc = pull(env, f"localhost:{port}/it/basic:1", check=False)
    assert proc.returncode == 125 and "(registry_error)" in proc.stderr, proc.stderr


def test_unknown_tag_is_404(env):
    err = refused(env, f"{env['b']}/it/basic:nope", "not_found", "MANIFEST_UNKNOWN")
    assert err["field"] == "ref"
    refused(env, f"{env['b']}/it/nothing:1", "not_found", "has no")


def test_untrusted_certificate_refused(env):
    # localhost:<token port> is configured nowhere: only the system's CAs, which
    # do not know the test's
    refused(env, f"localhost:{env['token'].port}/it/token:1", "registry_error",
            "certificate")


def test_corrupted_or_long_blob_refused_and_nothing_left(env):
    # the registry serves what its storage holds: change a byte of the layer there
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--creds", "alice:alice-pw",
                          "--cert-dir", str(env["base"] / "pki" / "certs.d"),
                          f"docker://{env['b']}/it/corrupt:1"],
                         check=True, capture_output=True, timeout=60).stdout
    hex_ = json.loads(raw)["layers"][0]["digest"].split(":")[1]
    data = env["basic"].storage / "docker/registry/v2/blobs/sha256" / hex_[:2] / hex_ / "data"
    good = data.read_bytes()
    data.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    try:
        refused(env, f"{env['b']}/it/corrupt:1", "registry_error", "digest")
        # longer than its descriptor says: refused before the rest is read
        data.write_bytes(good + b"\0" * 65536)
        refused(env, f"{env['b']}/it/corrupt:1", "registry_error",
                f"more than the {len(good)} bytes")
    finally:
        data.write_bytes(good)


def test_bad_refs_and_fields(env):
    for ref in ["", "Upper/case", "x:", f"{env['b']}/it/basic@sha256:12"]:
        err = refused(env, ref, "invalid_field", "")
        assert err["field"] == "ref", err
    err = refused(env, f"{env['b']}/it/basic:1", "invalid_field", "", name="Bad Name")
    assert err["field"] == "name"
    status, body = env["d"].request("POST", "/v1/images/pull", {"ref": "x", "tag": "y"})
    assert status == 400 and body["error"]["code"] == "unknown_field"


def test_registry_config_checked_at_start(tmp_path):
    bad = tmp_path / "registries.json"
    bad.write_text(json.dumps({"registries": {"r.example": {"username": "u",
                                                            "password": "s3cret-pw",
                                                            "cacert": "/nonexistent.pem"}}}))
    from daemon import AGENTBOXD
    proc = subprocess.run([AGENTBOXD, "--socket", str(tmp_path / "s"), "--state-dir",
                           str(tmp_path / "state"), "--registry-config", str(bad)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "registry r.example: cacert" in proc.stderr and "s3cret-pw" not in proc.stderr


def test_a_create_with_pull_pulls_first(env):
    """"pull": true on a create: an image the store lacks is pulled, then used."""
    d = env["d"]
    ref = f"{env['b']}/it/oncreate:1"
    push(oci_layout(env["base"] / "img-oncreate", "oncreate"), ref, "alice:alice-pw",
         env["base"] / "pki" / "certs.d")
    status, body = d.request("POST", "/v1/sandboxes", {"image": ref})
    assert status == 400 and body["error"]["field"] == "image", body
    assert ref in body["error"]["message"]
    status, body = d.request("POST", "/v1/sandboxes", {"image": ref, "pull": True}, timeout=120)
    assert status == 201, body
    assert body["image"]["name"] == ref
    assert tree_file(env, ref, "etc/who") == "oncreate\n"
    status, _ = d.request("DELETE", f"/v1/sandboxes/{body['id']}")
    assert status in (200, 204)
    # a tag the registry lacks: the field at fault is the image
    status, body = d.request("POST", "/v1/tasks", {"command": ["true"], "pull": True,
                                                   "image": f"{env['b']}/it/oncreate:nope"},
                             timeout=120)
    assert status == 400 and body["error"]["field"] == "image", body
    assert entries(env, "tmp") == []
