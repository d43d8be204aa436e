/*
 * fake-shim.c - a stand-in for agentbox-shim in test-fleet.c: it plays
 * the shim's part of src/shim/protocol.h without any sandbox, so that
 * the fleet's pool, keeper and recovery are tested without privileges.
 *
 *	fake-shim SANDBOX_DIR    (fd 3 = the held lock, kept open for life;
 *	                          fd 4 = where to say it is ready)
 *
 * What it does is chosen by sandbox.json's spec.env.FAKE_SHIM:
 *   (unset)   listen on shim.sock, "ok\n" on fd 4, serve
 *   "fail"    "error: no good\n" on fd 4, exit 1
 *   "slow"    never ready: wait for SIGTERM
 *   "refuse"  serve, but answer every op but "stop" (and "fake-end") with
 *             {"type":"error","errno":EIO,"message":"refused"}
 * Serving, one request per connection: {"type":"ok"} to "expire",
 * "pause", "resume", "kill", "unlink", "rename"; "stop" replies, writes
 * end.json {"reason":"deleted"} and exits; SIGTERM, SIGINT or SIGHUP write
 * end.json {"reason":"stopped"} and exit. The test's own op
 * {"op":"fake-end","reason":R,"time":T} replies, writes end.json with R
 * and T, and exits. end.json is written atomically (a temporary file
 * renamed), after shim.sock is removed, before the lock is let go.
 *
 * Every start and request is appended to ../../fake-shim.log (the state
 * directory's): "<id> start <pid> <start time>", then "<id> <op> <n> 0"
 * (n: expires_at for "expire", time for "fake-end", else 0): the test
 * checks what the fleet said there, and kills by pid what it started.
 */
#include "base/fileio.h"
#include "core/layout.h"
#include "shim/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LOG_PATH "../../fake-shim.log"

static char id[64] = "?";

static void log_line(const char *op, int64_t a, int64_t b)
{
	char line[160];
	int len = snprintf(line, sizeof(line), "%s %s %" PRId64 " %" PRId64 "\n", id, op, a, b);
	int fd = open(LOG_PATH, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void)write_all(fd, line, (size_t)len); /* O_APPEND: one line at once */
		close(fd);
	}
}

/* end.json, as the real shim writes it, then exit (letting go of the lock). */
static void end(const char *reason, int64_t when)
{
	(void)unlink(LAYOUT_SHIM_SOCK);
	json_t *j =
	    json_pack("{s:s, s:s, s:I}", "reason", reason, "detail", "", "time", (json_int_t)when);
	if (!j || json_dump_file(j, ".end.json.tmp", JSON_COMPACT) < 0 ||
	    rename(".end.json.tmp", LAYOUT_END_JSON) < 0)
		_exit(1);
	json_decref(j);
	_exit(0);
}

static void reply(int fd, json_t *msg)
{
	char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (text)
		(void)send(fd, text, strlen(text), MSG_NOSIGNAL);
	free(text);
	json_decref(msg);
}

/* An op whose reply is a plain {"type":"ok"}. */
static bool is_simple(const char *op)
{
	static const char *const ops[] = {"expire", "pause", "resume", "kill", "unlink", "rename"};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (strcmp(op, ops[i]) == 0)
			return true;
	return false;
}

/* One connection: its request, our one reply. */
static void serve(int fd, bool refuse)
{
	static char buf[SHIM_MSG_MAX + 1];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, SHIM_REQUEST_TIMEOUT_MS) <= 0)
		return;
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return;
	json_t *req = json_loadb(buf, (size_t)n, 0, NULL);
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op) {
		reply(fd, json_pack("{s:s, s:i, s:s}", "type", "error", "errno", EINVAL, "message",
				    "fake-shim: no op"));
		json_decref(req);
		return;
	}
	json_t *n_field = json_object_get(req, strcmp(op, "fake-end") == 0 ? "time" : "expires_at");
	int64_t arg = json_is_integer(n_field) ? json_integer_value(n_field) : 0;
	log_line(op, arg, 0);
	if (strcmp(op, "stop") == 0) {
		reply(fd, json_pack("{s:s}", "type", "ok"));
		end("deleted", wall_clock_ms());
	} else if (strcmp(op, "fake-end") == 0) {
		const char *reason = json_string_value(json_object_get(req, "reason"));
		reply(fd, json_pack("{s:s}", "type", "ok"));
		end(reason ? reason : "died", arg);
	} else if (refuse) {
		reply(fd, json_pack("{s:s, s:i, s:s}", "type", "error", "errno", EIO, "message",
				    "refused"));
	} else if (is_simple(op)) {
		reply(fd, json_pack("{s:s}", "type", "ok"));
	} else {
		reply(fd, json_pack("{s:s, s:i, s:s}", "type", "error", "errno", EINVAL, "message",
				    "fake-shim: unsupported op"));
	}
	json_decref(req);
}

int main(int argc, char **argv)
{
	if (argc != 2 || chdir(argv[1]) < 0)
		return 2;
	/* spawn_helper() hands us SIGTERM, SIGINT and SIGHUP blocked: read them here */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	sigprocmask(SIG_BLOCK, &stop, NULL);
	int sfd = signalfd(-1, &stop, SFD_CLOEXEC);

	json_t *sj = json_load_file(LAYOUT_SANDBOX_JSON, 0, NULL);
	const char *sid = json_string_value(json_object_get(sj, "id"));
	if (sid)
		snprintf(id, sizeof(id), "%s", sid);
	const char *mode = json_string_value(
	    json_object_get(json_object_get(json_object_get(sj, "spec"), "env"), "FAKE_SHIM"));
	char m[16];
	snprintf(m, sizeof(m), "%s", mode ? mode : "");
	json_decref(sj);

	unsigned long long start = 0;
	(void)proc_start_time(0, &start);
	char pid[64];
	snprintf(pid, sizeof(pid), "%d %llu\n", (int)getpid(), start);
	log_line("start", (int64_t)getpid(), (int64_t)start); /* first: the test finds us by it */
	(void)create_file_at(AT_FDCWD, LAYOUT_SHIM_PID, pid, 0600);

	if (strcmp(m, "fail") == 0) {
		(void)write_all(SHIM_READY_FD, "error: no good\n", 15);
		return 1;
	}
	int lfd = -1;
	if (strcmp(m, "slow") != 0) {
		struct sockaddr_un addr = {.sun_family = AF_UNIX, .sun_path = LAYOUT_SHIM_SOCK};
		lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
		    listen(lfd, SOMAXCONN) < 0) {
			(void)write_all(SHIM_READY_FD, "error: fake-shim: no socket\n", 28);
			return 1;
		}
		(void)write_all(SHIM_READY_FD, "ok\n", 3);
		close(SHIM_READY_FD);
	}
	for (;;) {
		struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents)
			end("stopped", wall_clock_ms());
		if (p[1].revents & POLLIN) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (cfd >= 0) {
				serve(cfd, strcmp(m, "refuse") == 0);
				close(cfd);
			}
		}
	}
}
