/*
 * agentbox-shim-call - one request to a sandbox's shim, from a shell: for
 * tests and for looking at a shim by hand. Not installed.
 *
 *	agentbox-shim-call [--stdin] [--fd-in FILE] [--fd-out] [--timeout MS]
 *	                   SANDBOX_DIR REQUEST_JSON
 *
 * Prints every reply as one line of JSON, until the last (exec and watch
 * reply until "exit"). --stdin passes our stdin with the request (exec).
 * When a reply carries an fd: --fd-out copies what it reads to stdout
 * after the line, --fd-in copies FILE into it; else it is closed.
 *
 * Exit status: 0; 1 on an error reply (printed as "error ERRNO: message"
 * on stderr) or a failure to talk to the shim; 2 for a usage error.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "shim/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int copy_fd(int from, int to)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(from, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		int r = write_all(to, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

static int handle_fd(int fd, const char *fd_in, bool fd_out)
{
	if (fd_out) {
		fflush(stdout);
		return copy_fd(fd, 1);
	}
	if (fd_in) {
		_cleanup_close_ int in = open(fd_in, O_RDONLY | O_CLOEXEC);
		return in < 0 ? -errno : copy_fd(in, fd);
	}
	return 0;
}

static bool is_last(const json_t *msg, const char *op)
{
	const char *type = json_string_value(json_object_get(msg, "type"));
	bool streams = strcmp(op, "exec") == 0 || strcmp(op, "watch") == 0;
	return !streams || (type && strcmp(type, "exit") == 0);
}

static int usage(void)
{
	fputs("usage: agentbox-shim-call [--stdin] [--fd-in FILE] [--fd-out] [--timeout MS] "
	      "SANDBOX_DIR REQUEST_JSON\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	bool pass_stdin = false, fd_out = false;
	const char *fd_in = NULL;
	uint64_t timeout = 0;
	int i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--stdin") == 0)
			pass_stdin = true;
		else if (strcmp(argv[i], "--fd-out") == 0)
			fd_out = true;
		else if (strcmp(argv[i], "--fd-in") == 0 && i + 1 < argc)
			fd_in = argv[++i];
		else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc &&
			 parse_u64(argv[i + 1], &timeout) == 0 && timeout <= 3600000)
			i++;
		else
			return usage();
	}
	if (argc - i != 2)
		return usage();
	const char *dir = argv[i], *text = argv[i + 1];
	json_error_t jerr;
	_cleanup_json_ json_t *req = json_loads(text, 0, &jerr);
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op) {
		fputs("agentbox-shim-call: the request is not a JSON object with an op\n", stderr);
		return 2;
	}
	struct error err = {0};
	int fd = -1, r = shim_connect(dir, &fd, &err);
	if (r == 0)
		r = shim_send(fd, text, pass_stdin ? 0 : -1, &err);
	for (bool last = false; r == 0 && !last;) {
		_cleanup_json_ json_t *msg = NULL;
		int got = -1;
		r = shim_recv(fd, timeout ? (int)timeout : -1, &msg, &got, &err);
		if (r < 0)
			break;
		_cleanup_free_ char *line = json_dumps(msg, JSON_COMPACT);
		printf("%s\n", line ? line : "?");
		last = is_last(msg, op);
		if (got >= 0) {
			r = handle_fd(got, fd_in, fd_out);
			close(got);
			if (r < 0)
				error_set_errno(&err, -r, "the fd of the reply");
		}
	}
	fflush(stdout);
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		fprintf(stderr, "error %d: %s\n", err.code, err.msg);
		return 1;
	}
	return 0;
}
