/*
 * terminal.c - a process's terminal over WebSocket: exec with "tty"
 * (docs/api.md, "A terminal"), once the API has started the process on a
 * terminal of its sandbox and described the answer (API_RESPONSE_TERMINAL).
 *
 * The answer is 101 with the Sec-WebSocket-Accept of the client's key;
 * libmicrohttpd then hands over the socket, and a thread of this file
 * relays until the end:
 *   client binary frames  -> the master (what is typed: 0x03 is Ctrl-C)
 *   client text frames    -> {"type": "resize", "rows", "cols"}: TIOCSWINSZ
 *   the master's output   -> binary frames
 *   the shim's "exit"     -> the terminal's last output, then a text frame
 *                            {"type": "exit", ...} and a close (1000)
 * Pings are answered with pongs; a close from the client is answered and
 * closes the master, which hangs the session up (SIGHUP), as closing a
 * terminal window does. Every frame is checked as websocket.h says; a
 * frame above TERMINAL_FRAME_MAX is closed with 1009.
 *
 * Each terminal holds one waiter of the fleet (its shim connection), so
 * terminals are bounded as process streams are (FLEET_WAITERS_MAX).
 * The thread ends within TERMINAL_POLL_MS of the daemon's stop (close
 * 1001): libmicrohttpd's stop waits for upgraded connections.
 */
#include "daemon/stream.h"

#include "base/base64.h"
#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "base/websocket.h"
#include "core/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* The largest frame payload a client may send; a larger one is closed with 1009. */
#define TERMINAL_FRAME_MAX (64 * 1024)
/* The largest control message (a text frame) a client may send; larger: 1009. */
#define TERMINAL_CONTROL_MAX 1024
/* Bytes of the terminal's output in one binary frame at most. */
#define TERMINAL_CHUNK (16 * 1024)
/* Frames waiting for the client, past which the terminal is not read (backpressure). */
#define TERMINAL_OUT_MAX (4 * TERMINAL_CHUNK)
/* How often the relay looks at the daemon's stop. */
#define TERMINAL_POLL_MS 250
/*
 * After the exit: how long the terminal's last output may take when
 * something else still holds the terminal (a background process); with
 * nobody left on it, its end comes at once.
 */
#define TERMINAL_DRAIN_MS 200
/* After our close frame: how long the client has to answer with its own. */
#define TERMINAL_CLOSE_WAIT_MS 1000
/*
 * A client silent this long is pinged; one silent past TERMINAL_GONE_MS
 * (no pong either: RFC 6455 says it must answer) is taken for gone and
 * closed with 1001, so a client that vanished without a FIN does not hold
 * its terminal (and a waiter of the fleet) for ever.
 */
#define TERMINAL_PING_MS 30000
#define TERMINAL_GONE_MS 75000

/* Relays running: terminal_wait_all() waits for none. */
static atomic_int live;

struct term {
	struct daemon *d;
	char id[SANDBOX_ID_SIZE];
	long pid;
	int shim_fd, master;
	MHD_socket sock;
	struct MHD_UpgradeResponseHandle *urh;
	uint8_t in[WS_HEADER_MAX + TERMINAL_FRAME_MAX]; /* from the client, not handled yet */
	size_t in_len;
	uint8_t typed[TERMINAL_FRAME_MAX]; /* for the master, not written yet */
	size_t typed_len, typed_off;
	struct buf out; /* frames for the client, not sent yet */
	size_t out_off;
	enum ws_opcode message; /* the fragmented message in progress, or 0 */
	json_t *exit;		/* the shim's exit record, once it came */
	int64_t drain_until;	/* after the exit: the terminal's last output until then */
	bool master_done;	/* read to its end (EIO: nobody holds the terminal) */
	bool shim_gone;
	bool close_sent;     /* our close is queued: nothing more is sent after it */
	bool client_closed;  /* the client's close came, or its connection ended */
	int64_t close_until; /* after our close: the client's until then */
	int64_t heard;	     /* when the client last sent anything */
	int64_t pinged;	     /* when we last pinged it */
};

/* CLOCK_MONOTONIC in ms: the relay's deadlines. */
static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sec-WebSocket-Accept for key: base64(SHA-1(key GUID)). 0 or -EIO. */
static int accept_of(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	char text[WS_KEY_LEN + sizeof(WS_GUID)];
	int n = snprintf(text, sizeof(text), "%s%s", key, WS_GUID);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;
	if (n < 0 || (size_t)n >= sizeof(text) ||
	    EVP_Digest(text, (size_t)n, md, &md_len, EVP_sha1(), NULL) != 1 || md_len != 20)
		return -EIO;
	_cleanup_buf_ struct buf b = {0};
	if (base64_encode(&b, md, md_len) < 0 || b.len != WS_ACCEPT_LEN)
		return -EIO;
	memcpy(out, b.data, WS_ACCEPT_LEN + 1);
	return 0;
}

/* Queue a frame for the client (never after our close). */
static void send_frame(struct term *t, enum ws_opcode op, const void *data, size_t len)
{
	if (t->close_sent)
		return;
	uint8_t h[WS_HEADER_MAX];
	size_t hl = ws_frame_header(h, op, len, NULL);
	buf_append(&t->out, (const char *)h, hl);
	if (len)
		buf_append(&t->out, data, len);
}

/* Queue our close frame: code, and a reason (cut to fit a control frame). */
static void send_close(struct term *t, int code, const char *reason)
{
	uint8_t p[WS_CONTROL_MAX];
	size_t n = strlen(reason);
	if (n > WS_CONTROL_MAX - 2)
		n = WS_CONTROL_MAX - 2;
	p[0] = (uint8_t)(code >> 8);
	p[1] = (uint8_t)code;
	memcpy(p + 2, reason, n);
	send_frame(t, WS_OP_CLOSE, p, n + 2);
	t->close_sent = true;
	t->close_until = now_ms() + TERMINAL_CLOSE_WAIT_MS;
	CLOSE_FD(t->master); /* the session hangs up, unless it has ended */
}

static void send_json(struct term *t, json_t *msg)
{
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (text)
		send_frame(t, WS_OP_TEXT, text, strlen(text));
}

/* A control message from the client: {"type": "resize", "rows": R, "cols": C}. */
static void on_control(struct term *t, const char *text, size_t len)
{
	_cleanup_json_ json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	const char *type = json_string_value(json_object_get(m, "type"));
	if (!json_is_object(m) || !type) {
		send_close(t, WS_CLOSE_INVALID_DATA, "a text frame must be a JSON control message");
		return;
	}
	if (strcmp(type, "resize") != 0) {
		send_close(t, WS_CLOSE_POLICY, "unknown control message");
		return;
	}
	json_t *rows = json_object_get(m, "rows"), *cols = json_object_get(m, "cols");
	if (json_object_size(m) != 3 || !json_is_integer(rows) || !json_is_integer(cols) ||
	    json_integer_value(rows) < 1 || json_integer_value(rows) > SPEC_TTY_DIM_MAX ||
	    json_integer_value(cols) < 1 || json_integer_value(cols) > SPEC_TTY_DIM_MAX) {
		send_close(t, WS_CLOSE_INVALID_DATA, "resize: rows and cols, 1 to 4096");
		return;
	}
	struct winsize ws = {.ws_row = (unsigned short)json_integer_value(rows),
			     .ws_col = (unsigned short)json_integer_value(cols)};
	if (t->master >= 0)
		(void)ioctl(t->master, TIOCSWINSZ, &ws); /* SIGWINCH to the foreground group */
}

/* One whole frame from the client, its payload unmasked. */
static void on_frame(struct term *t, const struct ws_frame *f, uint8_t *p)
{
	switch (f->opcode) {
	case WS_OP_PING:
		send_frame(t, WS_OP_PONG, p, f->len);
		return;
	case WS_OP_PONG:
		return;
	case WS_OP_CLOSE:
		t->client_closed = true;
		if (!t->close_sent) /* echo its code, as RFC 6455 5.5.1 asks */
			send_close(t, f->len >= 2 ? p[0] << 8 | p[1] : WS_CLOSE_NORMAL, "");
		return;
	case WS_OP_CONTINUATION:
	case WS_OP_TEXT:
	case WS_OP_BINARY:
		break;
	}
	enum ws_opcode op = f->opcode == WS_OP_CONTINUATION ? t->message : f->opcode;
	if (!op || (f->opcode != WS_OP_CONTINUATION && t->message)) {
		send_close(t, WS_CLOSE_PROTOCOL_ERROR, "a continuation out of place");
		return;
	}
	if (op == WS_OP_TEXT) {
		if (!f->fin || f->opcode == WS_OP_CONTINUATION) {
			send_close(t, WS_CLOSE_UNSUPPORTED, "a control message is one frame");
			return;
		}
		if (f->len > TERMINAL_CONTROL_MAX) {
			send_close(t, WS_CLOSE_TOO_BIG, "a control message is at most 1024 bytes");
			return;
		}
		on_control(t, (const char *)p, f->len);
		return;
	}
	/* binary, whole or in pieces: bytes typed at the terminal */
	t->message = f->fin ? 0 : WS_OP_BINARY;
	if (t->master >= 0) {
		memcpy(t->typed, p, f->len);
		t->typed_len = f->len;
		t->typed_off = 0;
	}
}

/* Handle the whole frames read so far, until one leaves bytes for the master. */
static void take_frames(struct term *t)
{
	size_t off = 0;
	while (!t->client_closed && t->typed_len == 0) {
		struct ws_frame f;
		int r = ws_frame_parse(t->in + off, t->in_len - off, TERMINAL_FRAME_MAX, &f);
		if (r == 0)
			break;
		if (r < 0 && t->close_sent) { /* after our close: only the client's matters */
			t->client_closed = true;
			break;
		}
		if (r == -EMSGSIZE) {
			send_close(t, WS_CLOSE_TOO_BIG, "a frame is at most 65536 bytes");
			break;
		}
		if (r < 0 || !f.masked) {
			send_close(t, WS_CLOSE_PROTOCOL_ERROR,
				   r < 0 ? "a malformed frame" : "a client's frames are masked");
			break;
		}
		if (t->in_len - off < f.header_len + f.len)
			break;
		uint8_t *p = t->in + off + f.header_len;
		ws_mask(p, f.len, f.mask, 0);
		if (!t->close_sent)
			on_frame(t, &f, p);
		else if (f.opcode == WS_OP_CLOSE)
			t->client_closed = true;
		off += f.header_len + f.len;
	}
	if (t->client_closed)
		off = t->in_len; /* nothing after a close counts */
	memmove(t->in, t->in + off, t->in_len - off);
	t->in_len -= off;
}

static void read_client(struct term *t)
{
	ssize_t n = recv(t->sock, t->in + t->in_len, sizeof(t->in) - t->in_len, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		t->client_closed = true;
		if (!t->close_sent)
			send_close(t, WS_CLOSE_NORMAL, "");
		return;
	}
	if (n > 0) {
		t->heard = now_ms();
		t->in_len += (size_t)n;
		take_frames(t);
	}
}

static void read_master(struct term *t)
{
	uint8_t buf[TERMINAL_CHUNK];
	ssize_t n = read(t->master, buf, sizeof(buf));
	if (n > 0)
		send_frame(t, WS_OP_BINARY, buf, (size_t)n);
	else if (n == 0 || (errno != EAGAIN && errno != EINTR))
		t->master_done = true; /* EIO: nobody holds the terminal any more */
}

static void write_master(struct term *t)
{
	ssize_t n = write(t->master, t->typed + t->typed_off, t->typed_len - t->typed_off);
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		t->typed_off = t->typed_len; /* a terminal gone: typing into nothing */
	else if (n > 0)
		t->typed_off += (size_t)n;
	if (t->typed_off == t->typed_len) {
		t->typed_len = t->typed_off = 0;
		take_frames(t); /* what waited behind it */
	}
}

static void write_client(struct term *t)
{
	ssize_t n = send(t->sock, t->out.data + t->out_off, t->out.len - t->out_off, MSG_NOSIGNAL);
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		t->client_closed = true;
		buf_truncate(&t->out, 0);
		t->out_off = 0;
		return;
	}
	if (n > 0 && (t->out_off += (size_t)n) == t->out.len) {
		buf_truncate(&t->out, 0);
		t->out_off = 0;
	}
}

static void listen_shim(struct term *t)
{
	for (;;) {
		json_t *m = NULL;
		struct error err = {0};
		int r = fleet_next_notice(t->shim_fd, 0, &m, &err);
		if (r == -ETIMEDOUT)
			return;
		if (r < 0) {
			t->shim_gone = true;
			return;
		}
		const char *type = json_string_value(json_object_get(m, "type"));
		if (type && strcmp(type, "exit") == 0 && !t->exit) {
			t->exit = m;
			t->drain_until = now_ms() + TERMINAL_DRAIN_MS;
			return;
		}
		json_decref(m);
	}
}

/* The process has ended and its last output is out: say how, and close. */
static void finish(struct term *t)
{
	if (t->exit) {
		_cleanup_json_ json_t *r = api_exit_json(t->pid, t->exit);
		if (r && json_object_set_new(r, "type", json_string("exit")) == 0)
			send_json(t, r);
		send_close(t, WS_CLOSE_NORMAL, "");
		return;
	}
	_cleanup_json_ json_t *e =
	    json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code", "sandbox_ended",
		      "message", "the sandbox ended before the process did");
	send_json(t, e);
	send_close(t, WS_CLOSE_INTERNAL, "the sandbox ended");
}

/* One turn: wait for what can move, move it. false once it is all over. */
static bool turn(struct term *t)
{
	int64_t now = now_ms();
	/* after our close: done once it is out and the client answered, or at the deadline
	 * (a client that reads nothing more does not hold the relay) */
	if (t->close_sent && ((t->client_closed && t->out.len == 0) || now >= t->close_until))
		return false;
	if (!t->close_sent && t->d->stopping)
		send_close(t, WS_CLOSE_GOING_AWAY, "agentboxd is stopping");
	if (!t->close_sent && now - t->heard >= TERMINAL_GONE_MS)
		send_close(t, WS_CLOSE_GOING_AWAY, "no answer to pings");
	if (!t->close_sent && now - t->heard >= TERMINAL_PING_MS &&
	    now - t->pinged >= TERMINAL_PING_MS) {
		send_frame(t, WS_OP_PING, "agentbox", 8);
		t->pinged = now;
	}
	if (!t->close_sent && (t->exit || t->shim_gone) &&
	    (t->master_done || t->master < 0 || now >= t->drain_until || t->shim_gone))
		finish(t);
	bool reading_master =
	    t->master >= 0 && !t->master_done && !t->close_sent && t->out.len < TERMINAL_OUT_MAX;
	struct pollfd p[3] = {
	    {.fd = t->sock,
	     .events = (short)((t->typed_len == 0 && !t->client_closed ? POLLIN : 0) |
			       (t->out.len ? POLLOUT : 0))},
	    {.fd = reading_master || t->typed_len ? t->master : -1,
	     .events = (short)((reading_master ? POLLIN : 0) | (t->typed_len ? POLLOUT : 0))},
	    {.fd = t->exit || t->shim_gone || t->close_sent ? -1 : t->shim_fd, .events = POLLIN},
	};
	int wait = TERMINAL_POLL_MS;
	if (t->exit && !t->close_sent && t->drain_until - now < wait)
		wait = t->drain_until > now ? (int)(t->drain_until - now) : 0;
	if (poll(p, 3, wait) < 0)
		return errno == EINTR;
	if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
		read_client(t);
	if (p[0].revents & POLLOUT && t->out.len)
		write_client(t);
	if (t->master >= 0 && p[1].revents & POLLOUT && t->typed_len)
		write_master(t);
	if (t->master >= 0 && p[1].revents & (POLLIN | POLLHUP | POLLERR) && !t->close_sent)
		read_master(t);
	if (p[2].revents)
		listen_shim(t);
	if (t->out.failed) { /* cannot happen within TERMINAL_OUT_MAX, but never silently */
		t->client_closed = true;
		buf_truncate(&t->out, 0);
	}
	return true;
}

static void term_free(struct term *t)
{
	CLOSE_FD(t->master);
	fleet_done(t->d->fleet, t->id, t->shim_fd); /* closes it, and frees its waiter */
	if (t->urh)
		MHD_upgrade_action(t->urh, MHD_UPGRADE_ACTION_CLOSE);
	json_decref(t->exit);
	buf_release(&t->out);
	free(t);
}

static void *relay(void *data)
{
	struct term *t = data;
	while (turn(t))
		;
	term_free(t);
	atomic_fetch_sub(&live, 1);
	return NULL;
}

void terminal_wait_all(void)
{
	for (int waited = 0; atomic_load(&live) > 0 && waited < TERMINAL_STOP_WAIT_MS; waited += 10)
		usleep(10 * 1000);
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
		       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)con_cls;
	struct terminal_pending *pending = cls;
	struct term *t = pending->t;
	pending->upgraded = true; /* from here on the relay owns t */
	t->sock = sock;
	t->urh = urh;
	t->heard = t->pinged = now_ms();
	int fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		(void)fcntl(sock, F_SETFL, fl | O_NONBLOCK);
	if (extra_in_size > sizeof(t->in))
		extra_in_size = sizeof(t->in); /* more than a frame's worth: it is refused anyway */
	memcpy(t->in, extra_in, extra_in_size);
	t->in_len = extra_in_size;
	take_frames(t);
	pthread_t th;
	pthread_attr_t attr;
	atomic_fetch_add(&live, 1);
	if (pthread_attr_init(&attr) != 0 ||
	    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&th, &attr, relay, t) != 0) {
		term_free(t);
		atomic_fetch_sub(&live, 1);
	}
	pthread_attr_destroy(&attr);
}

void terminal_abandon(struct terminal_pending *pending)
{
	if (pending->t && !pending->upgraded)
		term_free(pending->t);
	pending->t = NULL;
}

enum MHD_Result terminal_start(struct daemon *d, struct MHD_Connection *c, struct api_response *r,
			       struct terminal_pending *pending)
{
	struct term *t = calloc(1, sizeof(*t));
	int shim_fd = api_response_take_fd(r);
	if (!t) {
		fleet_done(d->fleet, r->terminal.id, shim_fd);
		return MHD_NO;
	}
	*t = (struct term){.d = d, .pid = r->terminal.pid, .shim_fd = shim_fd, .sock = -1};
	t->master = TAKE_FD(r->terminal.master);
	snprintf(t->id, sizeof(t->id), "%s", r->terminal.id);
	char accept[WS_ACCEPT_LEN + 1];
	int fl = fcntl(t->master, F_GETFL);
	struct MHD_Response *resp = NULL;
	if (accept_of(r->terminal.key, accept) < 0 || fl < 0 ||
	    fcntl(t->master, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    !(resp = MHD_create_response_for_upgrade(on_upgrade, pending))) {
		term_free(t);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "Upgrade");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	if (r->terminal.protocol) /* offered: the one chosen is named (RFC 6455 4.2.2) */
		MHD_add_response_header(resp, "Sec-WebSocket-Protocol", API_WS_PROTOCOL);
	*pending = (struct terminal_pending){.t = t};
	enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	if (ok != MHD_YES)
		terminal_abandon(pending); /* on_upgrade is never called */
	return ok;
}
