/*
 * agentbox cp: one file into an interactive sandbox (PUT
 * /v1/sandboxes/ID/files?path=PATH, the raw bytes as the body, streamed
 * from the local file) or out of one (GET, streamed into a temporary file
 * beside LOCAL, then renamed over it, so LOCAL is either the old file or
 * the whole new one). "-" is stdin or stdout. Bytes go as they are: no
 * text conversion, no modes or owners taken across.
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/cp.h"
#include "cli/upload.h"
#include "client/client.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest file a sandbox takes or gives (the API's limit). */
#define CP_FILE_MAX (UINT64_C(64) << 20)
/* Bytes of a sandbox path (the API's limit). */
#define CP_PATH_MAX 1024

static const char help[] =
    "usage: agentbox cp [OPTIONS] LOCAL ID:PATH\n"
    "       agentbox cp [OPTIONS] ID:PATH LOCAL\n"
    "\n"
    "Copy one file into interactive sandbox ID, or out of it, byte for byte;\n"
    "with -r a directory, as one tar (the host's tar makes or unpacks it).\n"
    "PATH is absolute and resolved by the sandbox itself (its symlinks lead\n"
    "only into it); only regular files are copied, at most 64 MiB.\n"
    "\n"
    "Into the sandbox: the parent directories of PATH are created and the\n"
    "file is replaced atomically, mode 0644, owned by the sandbox's user. A\n"
    "PATH ending in / gets LOCAL's file name. LOCAL - is stdin.\n"
    "\n"
    "Out of the sandbox: LOCAL is written atomically (a temporary file beside\n"
    "it, renamed over it once complete; a symlink at LOCAL is replaced, not\n"
    "followed), keeping the mode of the file it replaces (else 0666 less the\n"
    "umask). An existing directory LOCAL gets PATH's file name. LOCAL - is\n"
    "stdout.\n"
    "\n"
    "An argument is ID:PATH when what comes before its first ':' could be an\n"
    "id (letters, digits, _ and -); write a local file with a colon in its\n"
    "name as ./NAME.\n"
    "\n"
    "With -r, directory LOCAL becomes directory PATH of the sandbox (a PATH\n"
    "ending in / gets LOCAL's name inside it), or directory PATH becomes\n"
    "LOCAL (an existing directory LOCAL gets PATH's name inside it): its\n"
    "regular files and directories, at most 100000 entries, 64 deep, a tar of\n"
    "256 MiB; a symlink or anything else is left out with a line on stderr.\n"
    "Modes, owners and times are not taken across. The first failure stops\n"
    "the copy, leaving what was copied.\n"
    "\n"
    "options:\n"
    "  -r, --recursive copy a directory and everything in it\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 copied; 125 agentbox or agentboxd failed (one line on\n"
    "stderr; an error of agentboxd's ends in its code, e.g. (file_not_found));\n"
    "127 cp -r found no tar in PATH.\n";

/* Is arg ID:PATH? Then split it (PATH is checked by the caller). */
static bool is_remote(const char *arg, struct cp_remote *ret)
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon == arg || (size_t)(colon - arg) > CLIENT_ID_MAX)
		return false;
	char id[CLIENT_ID_MAX + 1];
	snprintf(id, sizeof(id), "%.*s", (int)(colon - arg), arg);
	if (!client_id_is_valid(id))
		return false;
	memcpy(ret->id, id, sizeof(id));
	ret->path = colon + 1;
	return true;
}

/* The last component of path ("" when it ends in '/'). */
static const char *last_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* ---- into the sandbox ------------------------------------------------------ */

int cp_file_in(struct client *c, const char *local, const struct cp_remote *rem)
{
	struct error err = {0};
	_cleanup_free_ char *dest = NULL, *target = NULL, *data = NULL;
	_cleanup_close_ int fd = -1;
	struct cli_upload u = {.name = local};
	struct client_request req = {.method = "PUT", .content_type = "application/octet-stream"};

	const char *path = rem->path;
	if (path[strlen(path) - 1] == '/') {
		if (strcmp(local, "-") == 0)
			return cli_fail("cp: %s:%s: name the file to write stdin to", rem->id,
					path);
		if (asprintf(&dest, "%s%s", path, last_name(local)) < 0) {
			dest = NULL;
			return cli_fail("cp: out of memory");
		}
		path = dest;
	}
	if (strlen(path) > CP_PATH_MAX)
		return cli_fail("cp: the sandbox path is longer than %d bytes", CP_PATH_MAX);
	if (client_sandbox_file_target(rem->id, path, &target, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	req.target = target;

	if (strcmp(local, "-") == 0) {
		/* a pipe has no length to announce: read it whole first */
		data = malloc(CP_FILE_MAX + 1);
		if (!data)
			return cli_fail("cp: out of memory");
		ssize_t n = read_all(STDIN_FILENO, data, CP_FILE_MAX + 1);
		if (n < 0)
			return cli_fail("cp: reading stdin: %s", strerror((int)-n));
		if ((uint64_t)n > CP_FILE_MAX)
			return cli_fail("cp: stdin holds more than %" PRIu64
					" MiB, the most a sandbox file may hold",
					CP_FILE_MAX >> 20);
		req.body = data;
		req.body_len = (size_t)n;
	} else {
		fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return cli_fail("cp: %s: %s", local, strerror(errno));
		struct stat st;
		if (fstat(fd, &st) < 0)
			return cli_fail("cp: %s: %s", local, strerror(errno));
		if (S_ISDIR(st.st_mode))
			return cli_fail("cp: %s is a directory: cp -r copies one", local);
		if (!S_ISREG(st.st_mode))
			return cli_fail("cp: %s is not a regular file", local);
		if ((uint64_t)st.st_size > CP_FILE_MAX)
			return cli_fail("cp: %s is larger than %" PRIu64
					" MiB, the most a sandbox file may hold",
					local, CP_FILE_MAX >> 20);
		u.fd = fd;
		u.size = (uint64_t)st.st_size;
		cli_upload_body(&req, &u);
	}

	_cleanup_json_ json_t *answer = NULL;
	if (client_request(c, &req, &answer, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	json_t *size = json_object_get(answer, "size");
	if (json_is_integer(size) && (uint64_t)json_integer_value(size) != req.body_len)
		return cli_fail("cp: agentboxd wrote %" JSON_INTEGER_FORMAT " bytes of %zu",
				json_integer_value(size), req.body_len);
	return 0;
}

/* ---- out of the sandbox ------------------------------------------------------ */

/* The temporary file, removed if a signal ends us before it is renamed. */
static char tmp_path[PATH_MAX + 64];

static void drop_tmp(int sig)
{
	if (tmp_path[0])
		unlink(tmp_path);
	raise(sig); /* SA_RESETHAND: now the default action */
}

static void guard_tmp(bool on)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa = {.sa_handler = on ? drop_tmp : SIG_DFL, .sa_flags = SA_RESETHAND};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
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
	if (len > CP_FILE_MAX - d->got)
		return error_set(err, EFBIG, "agentboxd sent more than %" PRIu64 " MiB",
				 CP_FILE_MAX >> 20);
	d->got += len;
	int r = write_all(d->fd, buf, len);
	if (r < 0)
		return error_set_errno(err, -r, "writing the file");
	return 0;
}

/* Where LOCAL says to write: itself, or PATH's name inside the directory it is. */
static int destination(const char *local, const struct cp_remote *rem, char **ret)
{
	struct stat st;
	size_t n = strlen(local);
	bool dir = local[n - 1] == '/' || (stat(local, &st) == 0 && S_ISDIR(st.st_mode));
	if (!dir) {
		*ret = strdup(local);
		return *ret ? 0 : -ENOMEM;
	}
	const char *name = last_name(rem->path);
	if (!*name)
		return cli_fail("cp: %s:%s names no file to write into %s", rem->id, rem->path,
				local);
	if (asprintf(ret, "%s%s%s", local, local[n - 1] == '/' ? "" : "/", name) < 0)
		return -ENOMEM;
	return 0;
}

int cp_file_out(struct client *c, const struct cp_remote *rem, const char *local)
{
	struct error err = {0};
	_cleanup_free_ char *target = NULL, *dest = NULL;
	if (client_sandbox_file_target(rem->id, rem->path, &target, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	struct download d = {.fd = STDOUT_FILENO};
	struct client_request req = {
	    .method = "GET",
	    .target = target,
	    .accept = "application/octet-stream",
	    .on_body = write_piece,
	    .data = &d,
	};
	if (strcmp(local, "-") == 0) {
		if (client_request(c, &req, NULL, &err) < 0)
			return cli_fail("cp: %s", err.msg);
		return 0;
	}

	int r = destination(local, rem, &dest);
	if (r > 0)
		return r; /* the message is out */
	if (r < 0)
		return cli_fail("cp: out of memory");
	_cleanup_free_ char *dir_copy = strdup(dest);
	if (!dir_copy)
		return cli_fail("cp: out of memory");
	const char *dir = dirname(dir_copy);
	int w = snprintf(tmp_path, sizeof(tmp_path), "%s/.agentbox-cp-XXXXXX", dir);
	if (w < 0 || (size_t)w >= sizeof(tmp_path))
		return cli_fail("cp: %s: the path is too long", dest);

	/* the mode of the file replaced, else what a new file gets */
	struct stat st;
	mode_t mode;
	if (stat(dest, &st) == 0 && S_ISREG(st.st_mode)) {
		mode = st.st_mode & 07777;
	} else {
		mode_t mask = umask(0);
		umask(mask);
		mode = 0666 & ~mask;
	}

	guard_tmp(true);
	_cleanup_close_ int fd = mkostemp(tmp_path, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		tmp_path[0] = '\0';
		guard_tmp(false);
		return cli_fail("cp: cannot create a file in %s: %s", dir, strerror(e));
	}
	d.fd = fd;
	int rc = 0;
	if (client_request(c, &req, NULL, &err) < 0)
		rc = cli_fail("cp: %s", err.msg);
	else if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		rc = cli_fail("cp: writing %s: %s", tmp_path, strerror(errno));
	else if (close(TAKE_FD(fd)) < 0)
		rc = cli_fail("cp: writing %s: %s", tmp_path, strerror(errno));
	else if (rename(tmp_path, dest) < 0)
		rc = cli_fail("cp: cannot rename %s to %s: %s", tmp_path, dest, strerror(errno));
	if (rc != 0)
		unlink(tmp_path);
	tmp_path[0] = '\0';
	guard_tmp(false);
	return rc;
}

static const struct option options[] = {
    {"recursive", no_argument, NULL, 'r'},
    {"socket", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {0},
};

int verb_cp(int argc, char **argv)
{
	const char *socket_path = NULL;
	bool recursive = false;
	int opt, rc;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":rh", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help, stdout);
			return 0;
		case 'r':
			recursive = true;
			break;
		case 's':
			socket_path = optarg;
			break;
		default:
			return cli_option_error("cp", opt, argv);
		}
	}
	if (argc - optind != 2)
		return cli_fail("cp: give a source and a destination (see agentbox cp --help)");
	const char *src = argv[optind], *dst = argv[optind + 1];
	struct cp_remote rs, rd;
	bool src_remote = is_remote(src, &rs), dst_remote = is_remote(dst, &rd);
	if (src_remote == dst_remote)
		return cli_fail("cp: one of the two must be ID:PATH and the other local (see "
				"agentbox cp --help)");
	const struct cp_remote *rem = src_remote ? &rs : &rd;
	const char *local = src_remote ? dst : src;
	if (rem->path[0] != '/')
		return cli_fail("cp: %s:%s: the sandbox path must be absolute", rem->id, rem->path);
	if (!*local)
		return cli_fail("cp: an empty local path");

	struct error err = {0};
	struct client c;
	if (client_init(&c, socket_path, &err) < 0)
		return cli_fail("cp: %s", err.msg);
	if (recursive && strcmp(local, "-") == 0)
		rc = cli_fail("cp: -r copies a directory: - is a stream");
	else if (recursive)
		rc = src_remote ? cp_tree_out(&c, rem, local) : cp_tree_in(&c, local, rem);
	else
		rc = src_remote ? cp_file_out(&c, rem, local) : cp_file_in(&c, local, rem);
	client_release(&c);
	return rc;
}
