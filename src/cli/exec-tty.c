/*
 * exec-tty.c - agentbox exec -t: the command on a terminal in the sandbox,
 * ours relayed to it over the WebSocket of exec with "tty" (docs/api.md,
 * "A terminal").
 *
 * With -i too (-it) our terminal goes raw: every key goes to the sandbox
 * as it is typed (Ctrl-C is the byte 0x03, which the sandbox's terminal
 * turns into SIGINT for its foreground process), and our terminal is put
 * back as it was on every way out: the end, a failure, and SIGTERM,
 * SIGHUP, SIGINT or SIGQUIT from elsewhere, which are taken through a
 * signalfd, so that the restore is ordinary code. The first size is
 * ours, sent with the request; every SIGWINCH sends the new one.
 *
 * The handshake's Sec-WebSocket-Accept is not verified: that needs SHA-1,
 * and this binary links no crypto (cli/meson.build); the answer's 101 and
 * its "Upgrade: websocket" are checked, and every frame after them.
 */
#include "cli/exec-tty.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/websocket.h"
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

/* The largest frame we take from agentboxd (its own are at most 16 KiB of output). */
#define TTY_FRAME_MAX (64 * 1024)
/* The most of an error answer's body we read. */
#define TTY_ERROR_BODY_MAX (1u << 20)
/* Bytes of our input in one frame at most. */
#define TTY_INPUT_CHUNK 4096

struct tty_run {
	int sock;
	int sigfd;
	bool input;	      /* -i: our stdin goes to the terminal */
	bool raw;	      /* our terminal is raw: put it back */
	struct termios saved; /* as it was */
	uint8_t in[WS_HEADER_MAX + TTY_FRAME_MAX];
	size_t in_len;
	json_t *exit;	 /* {"type": "exit", ...} once it came */
	char error[256]; /* {"type": "error"}'s message, or a close's reason */
	bool closed;
};

static void restore(struct tty_run *t)
{
	if (t->raw)
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	t->raw = false;
}

/* Our size: of stdin's terminal, else stdout's, else 24 x 80. */
static void our_size(unsigned *rows, unsigned *cols)
{
	struct winsize ws = {0};
	if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row) &&
	    (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row))
		ws = (struct winsize){.ws_row = 24, .ws_col = 80};
	*rows = ws.ws_row ? ws.ws_row : 24;
	*cols = ws.ws_col ? ws.ws_col : 80;
}

/* One frame to agentboxd, masked as a client's are. */
static int send_frame(struct tty_run *t, enum ws_opcode op, const void *data, size_t len)
{
	uint8_t mask[4];
	if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
		return -EIO;
	_cleanup_free_ uint8_t *f = malloc(WS_HEADER_MAX + len);
	if (!f)
		return -ENOMEM;
	size_t hl = ws_frame_header(f, op, len, mask);
	memcpy(f + hl, data, len);
	ws_mask(f + hl, len, mask, 0);
	return write_all(t->sock, f, hl + len);
}

static int send_resize(struct tty_run *t)
{
	unsigned rows, cols;
	our_size(&rows, &cols);
	char msg[96];
	int n =
	    snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
	return send_frame(t, WS_OP_TEXT, msg, (size_t)n);
}

/* The request head and body, then the answer's head; leftover bytes are frames. */
static int handshake(struct tty_run *t, struct client *c, const char *target, const char *body,
		     int *ret_status, struct buf *ret_body, struct error *err)
{
	uint8_t raw_key[16];
	_cleanup_buf_ struct buf key = {0};
	if (getrandom(raw_key, sizeof(raw_key), 0) != (ssize_t)sizeof(raw_key) ||
	    base64_encode(&key, raw_key, sizeof(raw_key)) < 0)
		return error_set(err, EIO, "cannot make a WebSocket key");
	_cleanup_buf_ struct buf req = {0};
	buf_printf(&req,
		   "POST %s HTTP/1.1\r\nHost: %s\r\n%s%sContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		   "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n%s",
		   target, c->ep.transport == HTTP_TCP ? c->ep.authority : "localhost",
		   c->auth_header ? c->auth_header : "", c->auth_header ? "\r\n" : "", strlen(body),
		   key.data, body);
	if (req.failed)
		return error_set(err, ENOMEM, "out of memory");
	int r = write_all(t->sock, req.data, req.len);
	if (r < 0)
		return error_set_errno(err, -r, "sending the request to %s", c->ep.name);
	/* the head, byte runs at a time, up to its blank line */
	_cleanup_buf_ struct buf head = {.max = HTTP_HEAD_MAX};
	char *end = NULL;
	while (!end) {
		char chunk[4096];
		ssize_t n = read(t->sock, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return error_set(err, n < 0 ? errno : ECONNRESET,
					 "%s closed the connection before it answered", c->ep.name);
		if (buf_append(&head, chunk, (size_t)n) < 0)
			return error_set(err, EPROTO, "%s's answer has a head above %u bytes",
					 c->ep.name, HTTP_HEAD_MAX);
		end = strstr(head.data, "\r\n\r\n");
	}
	size_t head_len = (size_t)(end - head.data) + 4;
	int status = 0;
	if (sscanf(head.data, "HTTP/1.1 %3d ", &status) != 1)
		return error_set(err, EPROTO, "%s's answer is not HTTP/1.1", c->ep.name);
	*end = '\0';
	if (status == 101) {
		/* the header names are case-insensitive; the value is a token */
		bool upgrade = false;
		for (char *line = strstr(head.data, "\r\n"); line && !upgrade;
		     line = strstr(line + 2, "\r\n"))
			upgrade = strncasecmp(line + 2, "Upgrade:", 8) == 0 &&
				  strcasestr(line + 10, "websocket");
		if (!upgrade)
			return error_set(err, EPROTO, "%s answered 101 without a WebSocket",
					 c->ep.name);
		t->in_len = head.len - head_len;
		if (t->in_len > sizeof(t->in))
			return error_set(err, EPROTO, "%s sent too much at once", c->ep.name);
		memcpy(t->in, head.data + head_len, t->in_len);
		*ret_status = status;
		return 0;
	}
	/* an answer with a body: an error, or a command that could not run */
	size_t len = 0;
	char *cl = strcasestr(head.data, "\r\nContent-Length:");
	if (!cl || sscanf(cl + 17, "%zu", &len) != 1 || len > TTY_ERROR_BODY_MAX)
		return error_set(err, EPROTO, "%s answered %d without a body we can read",
				 c->ep.name, status);
	buf_append(ret_body, head.data + head_len, head.len - head_len);
	while (ret_body->len < len && !ret_body->failed) {
		char chunk[4096];
		ssize_t n = read(t->sock, chunk, sizeof(chunk));
		if (n <= 0 && !(n < 0 && errno == EINTR))
			return error_set(err, EPROTO, "%s's answer ended early", c->ep.name);
		if (n > 0)
			buf_append(ret_body, chunk, (size_t)n);
	}
	*ret_status = status;
	return 0;
}

/* One frame from agentboxd. */
static int on_frame(struct tty_run *t, const struct ws_frame *f, uint8_t *p)
{
	switch (f->opcode) {
	case WS_OP_BINARY:
	case WS_OP_CONTINUATION:
		return write_all(STDOUT_FILENO, p, f->len);
	case WS_OP_TEXT: {
		_cleanup_json_ json_t *m = json_loadb((const char *)p, f->len, 0, NULL);
		const char *type = json_string_value(json_object_get(m, "type"));
		if (type && strcmp(type, "exit") == 0 && !t->exit)
			t->exit = TAKE_PTR(m);
		else if (type && strcmp(type, "error") == 0)
			snprintf(t->error, sizeof(t->error), "%s",
				 json_string_value(
				     json_object_get(json_object_get(m, "error"), "message"))
				     ?: "error");
		return 0;
	}
	case WS_OP_PING:
		return send_frame(t, WS_OP_PONG, p, f->len);
	case WS_OP_PONG:
		return 0;
	case WS_OP_CLOSE:
		t->closed = true;
		if (!t->exit && !t->error[0] && f->len > 2)
			snprintf(t->error, sizeof(t->error), "%.*s", (int)f->len - 2,
				 (const char *)p + 2);
		(void)send_frame(t, WS_OP_CLOSE, p, f->len >= 2 ? 2 : 0);
		return 0;
	}
	return 0;
}

/* The frames read so far. -EPROTO for one we cannot take. */
static int take_frames(struct tty_run *t)
{
	size_t off = 0;
	int r = 0;
	while (!t->closed) {
		struct ws_frame f;
		r = ws_frame_parse(t->in + off, t->in_len - off, TTY_FRAME_MAX, &f);
		if (r <= 0 || t->in_len - off < f.header_len + f.len)
			break;
		if (f.masked) {
			r = -EPROTO;
			break;
		}
		if ((r = on_frame(t, &f, t->in + off + f.header_len)) < 0)
			break;
		off += f.header_len + f.len;
	}
	memmove(t->in, t->in + off, t->in_len - off);
	t->in_len -= off;
	return r < 0 ? r : 0;
}

/* Relay until agentboxd closes. 0, or 128+N when signal N told us to stop. */
static int relay(struct tty_run *t, struct error *err)
{
	bool stdin_open = t->input;
	int r = take_frames(t);
	while (r == 0 && !t->closed) {
		struct pollfd p[3] = {{.fd = t->sock, .events = POLLIN},
				      {.fd = t->sigfd, .events = POLLIN},
				      {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return error_set_errno(err, errno, "poll");
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			if (read(t->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGWINCH)
					r = send_resize(t);
				else
					return 128 + (int)si.ssi_signo;
			}
		}
		if (r == 0 && p[2].revents) {
			uint8_t buf[TTY_INPUT_CHUNK];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n > 0)
				r = send_frame(t, WS_OP_BINARY, buf, (size_t)n);
			else if (n == 0 || errno != EINTR)
				stdin_open = false;
		}
		if (r == 0 && p[0].revents) {
			ssize_t n = read(t->sock, t->in + t->in_len, sizeof(t->in) - t->in_len);
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				return error_set(err, ECONNRESET,
						 "agentboxd closed the terminal without a close");
			if (n > 0) {
				t->in_len += (size_t)n;
				r = take_frames(t);
			}
		}
	}
	if (r < 0)
		return error_set_errno(err, -r, "the terminal's connection");
	return 0;
}

/* An answer that is not an upgrade: an error, or a command that could not run. */
static int answered(int status, const char *body, size_t len)
{
	_cleanup_json_ json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
	if (status == 200 && json_is_object(json_object_get(root, "exit_code") ? root : NULL)) {
		const char *text = json_string_value(json_object_get(root, "stderr"));
		if (text)
			fputs(text, stderr);
		return exec_exit_status(root);
	}
	json_t *e = json_object_get(root, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));
	if (msg && code)
		return cli_fail("exec: %s (%s)", msg, code);
	return cli_fail("exec: agentboxd answered %d", status);
}

/* Stop signals and SIGWINCH come through a signalfd (blocked, so they only queue there). */
static int take_signals(struct tty_run *t, sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	int sigs[] = {SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGQUIT};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&set, sigs[i]);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return -errno;
	t->sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	return t->sigfd < 0 ? -errno : 0;
}

int exec_tty_run(struct client *c, const char *target, json_t *body, bool input)
{
	struct tty_run *t = calloc(1, sizeof(*t));
	if (!t)
		return cli_fail("exec: out of memory");
	*t = (struct tty_run){.sock = -1, .sigfd = -1, .input = input};
	struct error err = {0};
	int rc = 0, status = 0;
	_cleanup_buf_ struct buf answer = {.max = TTY_ERROR_BODY_MAX + 1};
	unsigned rows, cols;
	our_size(&rows, &cols);
	sigset_t old;
	_cleanup_free_ char *text = NULL;
	if (input && !isatty(STDIN_FILENO)) {
		rc = cli_fail("exec: -it needs a terminal on stdin (use -i alone for a pipe)");
		goto out;
	}
	if (c->ep.tls) {
		rc = cli_fail("exec: -t does not speak https yet; use the unix socket");
		goto out;
	}
	if (json_object_set_new(body, "tty", json_true()) < 0 ||
	    json_object_set_new(body, "rows", json_integer(rows)) < 0 ||
	    json_object_set_new(body, "cols", json_integer(cols)) < 0 ||
	    !(text = json_dumps(body, JSON_COMPACT))) {
		rc = cli_fail("exec: out of memory");
		goto out;
	}
	struct http_options opt = {.connect_timeout_ms = c->connect_timeout_ms,
				   .peer = "agentboxd"};
	int fl;
	if (http_connect(&c->ep, &opt, &t->sock, &err) < 0 || (fl = fcntl(t->sock, F_GETFL)) < 0 ||
	    fcntl(t->sock, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
	    handshake(t, c, target, text, &status, &answer, &err) < 0) {
		rc = cli_fail("exec: %s", err.msg);
		goto out;
	}
	if (status != 101) {
		rc = answered(status, answer.data, answer.len);
		goto out;
	}
	if (take_signals(t, &old) < 0) {
		rc = cli_fail("exec: cannot take signals: %s", strerror(errno));
		goto out;
	}
	if (input && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
		struct termios raw = t->saved;
		cfmakeraw(&raw);
		t->raw = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
	}
	/* the size may have changed since the request */
	rc = send_resize(t) < 0 ? -EPIPE : relay(t, &err);
	restore(t);
	(void)sigprocmask(SIG_SETMASK, &old, NULL);
	if (rc > 128) { /* a signal told us to stop: the session hangs up with our close */
		uint8_t bye[2] = {WS_CLOSE_NORMAL >> 8, WS_CLOSE_NORMAL & 0xff};
		(void)send_frame(t, WS_OP_CLOSE, bye, 2);
	} else if (rc < 0) {
		rc = cli_fail("exec: %s", err.msg[0] ? err.msg : "the terminal's connection broke");
	} else if (t->exit) {
		rc = exec_exit_status(t->exit);
	} else {
		rc = cli_fail("exec: %s",
			      t->error[0] ? t->error : "the terminal closed without an exit");
	}
out:
	restore(t);
	CLOSE_FD(t->sock);
	CLOSE_FD(t->sigfd);
	json_decref(t->exit);
	free(t);
	return rc;
}
