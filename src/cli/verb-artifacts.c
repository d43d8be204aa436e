/*
 * agentbox artifacts: download a task's artifacts (the paths its
 * "artifacts" declared, as agentboxd kept them when its last attempt
 * ended), or list them.
 *
 * Each file is fetched on its own (GET /v1/tasks/ID/artifacts/PATH) and
 * written beneath DIR at its path relative to /workspace (/tmp's under
 * DIR/tmp/); each directory is made. A path that would leave DIR (a "."
 * or ".." component) is refused; nothing is written through a symlink.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "client/client.h"
#include "client/http-client.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most one artifact file may send: the daemon's cap for all of them. */
#define ARTIFACT_FILE_MAX (256ULL << 20)

static const char help[] =
    "usage: agentbox artifacts [OPTIONS] ID\n"
    "\n"
    "Download task ID's artifacts (submit --artifact PATH) into DIR: a file\n"
    "under /workspace/ goes to DIR/<its path below /workspace>, one under\n"
    "/tmp/ to DIR/tmp/<its path below /tmp>; directories are made. They are\n"
    "what the task's last ended attempt left, within agentboxd's cap; what\n"
    "was truncated or left out (symlinks, devices, FIFOs) is said on stderr.\n"
    "\n"
    "options:\n"
    "  -o, --output DIR  where to write them (default: the current directory)\n"
    "  --list            list them instead: TYPE, SIZE, TRUNCATED, PATH\n"
    "  --json            with --list: agentboxd's answer as JSON\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 done; 125 agentbox or agentboxd failed (one line on stderr;\n"
    "an error of agentboxd's ends in its code, e.g. (not_found)).\n";

enum { OPT_LIST = CLI_OPT_VERB, OPT_JSON };

static const struct option options[] = {
    {"output", required_argument, NULL, 'o'}, {"list", no_argument, NULL, OPT_LIST},
    {"json", no_argument, NULL, OPT_JSON},    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},	      {0},
};

/* A path's place beneath DIR ("" for /workspace itself), or NULL if it has none. */
static const char *local_rel(const char *path, char *buf, size_t size)
{
	const char *rel;
	if (strncmp(path, "/workspace", 10) == 0 && (path[10] == '/' || path[10] == '\0'))
		rel = path[10] ? path + 11 : "";
	else if (strncmp(path, "/tmp", 4) == 0 && (path[4] == '/' || path[4] == '\0'))
		rel = path + 1;
	else
		return NULL;
	if ((size_t)snprintf(buf, size, "%s", rel) >= size)
		return NULL;
	size_t n = strlen(buf);
	while (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
	for (const char *p = buf; *p;) {
		size_t k = strcspn(p, "/");
		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
			return NULL;
		p += k + (p[k] == '/');
	}
	return buf;
}

/* mkdir -p rel beneath dirfd, one component at a time, no symlink followed; its fd. */
static int make_dirs(int dirfd, const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s", rel);
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	for (char *s = p, *slash; fd >= 0 && *s; s = slash ? slash + 1 : s + strlen(s)) {
		slash = strchr(s, '/');
		if (slash)
			*slash = '\0';
		if (mkdirat(fd, s, 0755) < 0 && errno != EEXIST) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		int next = openat(fd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		errno = e;
		fd = next;
		if (!slash)
			break;
	}
	return fd;
}

struct download {
	int fd;
	uint64_t got;
};

static int write_piece(const struct http_response *res, const char *buf, size_t len, void *data,
		       struct error *err)
{
	(void)res;
	struct download *d = data;
	if (len > ARTIFACT_FILE_MAX - d->got)
		return error_set(err, EFBIG, "agentboxd sent more than %llu MiB",
				 ARTIFACT_FILE_MAX >> 20);
	d->got += len;
	int r = write_all(d->fd, buf, len);
	return r < 0 ? error_set_errno(err, -r, "writing the file") : 0;
}

static int fetch(struct client *c, const char *id, const char *path, int dirfd, const char *rel)
{
	struct error err = {0};
	char base[CLIENT_TARGET_MAX];
	if (client_task_target(base, sizeof(base), id, "/artifacts", &err) < 0)
		return cli_fail("artifacts: %s", err.msg);
	size_t need = http_query_escape(path + 1, NULL, 0);
	_cleanup_free_ char *target = malloc(strlen(base) + need + 2);
	if (!target)
		return cli_fail("artifacts: out of memory");
	size_t bl = strlen(base);
	memcpy(target, base, bl);
	target[bl] = '/';
	http_query_escape(path + 1, target + bl + 1, need + 1);

	const char *slash = strrchr(rel, '/');
	_cleanup_free_ char *parent = strndup(rel, slash ? (size_t)(slash - rel) : 0);
	_cleanup_close_ int pfd = parent ? make_dirs(dirfd, parent) : -1;
	if (pfd < 0)
		return cli_fail("artifacts: cannot make the directory of %s: %s", rel,
				strerror(errno));
	const char *name = slash ? slash + 1 : rel;
	_cleanup_close_ int fd =
	    openat(pfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return cli_fail("artifacts: cannot write %s: %s", rel, strerror(errno));
	struct download d = {.fd = fd};
	struct client_request req = {.method = "GET",
				     .target = target,
				     .accept = "application/octet-stream",
				     .on_body = write_piece,
				     .data = &d};
	if (client_request(c, &req, NULL, &err) < 0)
		return cli_fail("artifacts: %s: %s", path, err.msg);
	return 0;
}

static void print_list(const json_t *entries)
{
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e)
	{
		printf("%-9s %12" JSON_INTEGER_FORMAT " %-3s %s\n",
		       json_string_value(json_object_get(e, "type")),
		       json_integer_value(json_object_get(e, "size")),
		       json_is_true(json_object_get(e, "truncated")) ? "yes" : "no",
		       json_string_value(json_object_get(e, "path")));
	}
}

static int download_all(struct client *c, const char *id, const json_t *entries, const char *out)
{
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return cli_fail("artifacts: %s: %s", out, strerror(errno));
	_cleanup_close_ int dirfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cli_fail("artifacts: %s: %s", out, strerror(errno));
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e)
	{
		const char *path = json_string_value(json_object_get(e, "path"));
		const char *type = json_string_value(json_object_get(e, "type"));
		char buf[4096];
		const char *rel = path ? local_rel(path, buf, sizeof(buf)) : NULL;
		if (!rel || !type)
			return cli_fail("artifacts: agentboxd listed a path outside /workspace and "
					"/tmp: %s",
					path ? path : "(none)");
		if (json_is_true(json_object_get(e, "truncated")))
			fprintf(stderr,
				"agentbox artifacts: %s was truncated (a cap was reached)\n", path);
		int rc = 0;
		if (strcmp(type, "directory") == 0) {
			int fd = *rel ? make_dirs(dirfd, rel) : 0;
			if (fd < 0)
				rc =
				    cli_fail("artifacts: cannot make %s: %s", rel, strerror(errno));
			else if (*rel)
				close(fd);
		} else if (strcmp(type, "file") == 0) {
			rc = fetch(c, id, path, dirfd, rel);
		} else {
			bool missing = strcmp(type, "missing") == 0;
			fprintf(stderr, "agentbox artifacts: %s is %s%s: not kept\n", path,
				missing ? "" : "a ", type);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int verb_artifacts(int argc, char **argv)
{
	const char *socket_path = NULL, *out = ".";
	bool list = false, json = false;
	opterr = 0;
	optind = 1;
	int opt;
	while ((opt = getopt_long(argc, argv, ":ho:", options, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case OPT_LIST:
			list = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		case CLI_OPT_SOCKET:
			socket_path = optarg;
			break;
		case 'h':
			fputs(help, stdout);
			return 0;
		case ':':
			return cli_fail("artifacts: option '%s' needs a value", argv[optind - 1]);
		default:
			return cli_fail("artifacts: unknown option '%s' (see agentbox artifacts "
					"--help)",
					argv[optind - 1]);
		}
	}
	if (optind + 1 != argc)
		return cli_fail("artifacts: give one task id (agentbox artifacts [OPTIONS] ID)");
	if (json && !list)
		return cli_fail("artifacts: --json goes with --list");
	const char *id = argv[optind];
	struct error err = {0};
	struct client c;
	char target[CLIENT_TARGET_MAX];
	if (client_task_target(target, sizeof(target), id, "/artifacts", &err) < 0 ||
	    client_init(&c, socket_path, &err) < 0)
		return cli_fail("artifacts: %s", err.msg);
	_cleanup_json_ json_t *manifest = NULL;
	int rc = 0;
	if (client_call(&c, "GET", target, NULL, &manifest, &err) < 0) {
		rc = cli_fail("artifacts: %s", err.msg);
	} else if (json) {
		if (client_print_json(stdout, manifest) < 0)
			rc = cli_fail("artifacts: cannot write the output");
	} else if (list) {
		print_list(json_object_get(manifest, "entries"));
	} else {
		rc = download_all(&c, id, json_object_get(manifest, "entries"), out);
	}
	client_release(&c);
	if (rc == 0 && fflush(stdout) == EOF)
		rc = cli_fail("artifacts: cannot write the output");
	return rc;
}
