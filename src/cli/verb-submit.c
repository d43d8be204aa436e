/*
 * agentbox submit: queue a command as a durable task with agentboxd and
 * print its id.
 *
 * Everything is checked here first (exit 125 before anything is sent);
 * what is not given is left out of the request, so agentboxd's defaults
 * apply. Sizes go as whole MiB, rounded up; the timeout as seconds.
 */
#include "base/base64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "base/parse.h"
#include "cli/cli.h"
#include "cli/upload.h"
#include "cli/options.h"
#include "client/client.h"
#include "core/limits.h"
#include "core/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The contents of all --file options together, decoded; and how many files. */
#define SUBMIT_FILES_MAX       (4u << 20)
#define SUBMIT_FILES_COUNT_MAX 1024
#define SUBMIT_DIR_DEPTH_MAX   64 /* directories beneath a --file directory */

static const char help[] =
    "usage: agentbox submit [OPTIONS] -- COMMAND [ARG...]\n"
    "       agentbox submit [OPTIONS] --image REF   (its Entrypoint and Cmd)\n"
    "\n"
    "Queue COMMAND as a task with agentboxd and print the task's id. The\n"
    "task runs in a fresh sandbox per attempt, whether or not anyone waits:\n"
    "follow it with agentbox wait, status, logs; stop it with cancel.\n"
    "\n"
    "options (what is not given is agentboxd's default):\n" CLI_HELP_LIMITS
    "  --timeout DUR        wall-clock limit per attempt: 500ms, 90s, 5m, 1h30m\n"
    "  --env KEY=VALUE      set a variable in the sandbox; repeatable\n"
    "  --attempts N         run at most N attempts (1 to 100)\n"
    "  --retry-on LIST      end statuses that start a new attempt, comma-\n"
    "                       separated: failed, oom_killed, timed_out, lost\n"
    "  --file LOCAL:SANDBOX copy the local file LOCAL into the sandbox at the\n"
    "                       absolute path SANDBOX (text as is, other bytes as\n"
    "                       base64); a directory LOCAL, every file beneath it\n"
    "                       (symlinks left out); repeatable; at most 4 MiB and\n"
    "                       1024 files for all together, but files past\n"
    "                       64 KiB: the first 16 of them are sent ahead\n"
    "                       (POST /v1/inputs), up to 1 GiB each\n"
    "  --artifact PATH      keep PATH (a file, or a directory: PATH/) of the\n"
    "                       sandbox when the task ends: agentbox artifacts ID;\n"
    "                       repeatable\n" CLI_HELP_NETWORK CLI_HELP_IMAGE CLI_HELP_METADATA
	CLI_HELP_SOCKET_WIDE CLI_HELP_SIZES CLIENT_HELP_ENVIRONMENT "\n"
    "exit status: 0 queued (the id is on stdout); 125 agentbox or agentboxd\n"
    "failed or refused the task (one line on stderr; an error of agentboxd's\n"
    "ends in its code and the field at fault, e.g. (invalid_field, field\n"
    "limits.memory_mb)).\n";

enum {
	OPT_TIMEOUT = CLI_OPT_VERB,
	OPT_ATTEMPTS,
	OPT_RETRY_ON,
	OPT_FILE,
	OPT_ARTIFACT,
};

static const struct option options[] = {
    CLI_LIMIT_OPTIONS,
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"env", required_argument, NULL, CLI_OPT_ENV},
    {"attempts", required_argument, NULL, OPT_ATTEMPTS},
    {"retry-on", required_argument, NULL, OPT_RETRY_ON},
    {"file", required_argument, NULL, OPT_FILE},
    {"artifact", required_argument, NULL, OPT_ARTIFACT},
    {"metadata", required_argument, NULL, CLI_OPT_METADATA},
    {"network", required_argument, NULL, CLI_OPT_NETWORK},
    {"network-rate", required_argument, NULL, CLI_OPT_NETWORK_RATE},
    {"secret", required_argument, NULL, CLI_OPT_SECRET},
    CLI_IMAGE_OPTIONS,
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {0},
};

/*
 * A --file past this is sent ahead as an input (POST /v1/inputs), streamed,
 * and named in files by its id, while the task may name one more
 * (TASK_INPUTS_MAX); the rest go inline, within SUBMIT_FILES_MAX. Inline
 * bytes cost the daemon far more than an input's (docs/PERFORMANCE.md,
 * "A task's inputs"): 64 KiB is where an input is already cheaper.
 */
#define SUBMIT_INLINE_MAX (64u << 10)

/* A file to send ahead as an input: its fd (owned), names, and size. */
struct submit_input {
	int fd;
	char *local, *dest;
	uint64_t size;
};

struct submit_args {
	json_t *body; /* the request, built as options come */
	size_t file_bytes;
	struct submit_input inputs[TASK_INPUTS_MAX];
	size_t ninputs;
	const char *socket_path;
	bool help;
};

/* body[key], created as an empty object or array on first use. */
static json_t *member(struct submit_args *a, const char *key, bool array)
{
	json_t *m = json_object_get(a->body, key);
	if (m)
		return m;
	m = array ? json_array() : json_object();
	if (!m || json_object_set_new(a->body, key, m) < 0)
		return NULL;
	return m;
}

static int add_retry_on(struct submit_args *a, const char *arg, struct error *err)
{
	json_t *list = member(a, "retry_on", true);
	if (!list)
		return error_set_errno(err, ENOMEM, "building the request");
	_cleanup_free_ char *copy = strdup(arg);
	if (!copy)
		return error_set_errno(err, ENOMEM, "building the request");
	char *save = NULL;
	bool any = false;
	for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		enum task_status s;
		if (task_status_parse(name, &s) < 0 || !task_status_is_final(s) ||
		    s == TASK_SUCCEEDED || s == TASK_CANCELLED)
			return error_set(err, EINVAL,
					 "--retry-on: '%s' is not one of failed, oom_killed, "
					 "timed_out, lost",
					 name);
		any = true;
		bool seen = false;
		size_t i;
		json_t *v;
		json_array_foreach(list, i, v)
		{
			if (strcmp(json_string_value(v), name) == 0)
				seen = true;
		}
		if (!seen && json_array_append_new(list, json_string(name)) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
	}
	if (!any)
		return error_set(err, EINVAL, "--retry-on: an empty list");
	return 0;
}

/*
 * The content of a file for body.files: a string when it is UTF-8 text
 * without NUL, else {"base64": ...}. NULL when out of memory.
 */
static json_t *file_content(const char *data, size_t len)
{
	if (!memchr(data, '\0', len)) {
		json_t *text = json_stringn(data, len);
		if (text)
			return text;
	}
	_cleanup_buf_ struct buf b = {0};
	char *enc = NULL;
	size_t n = 0;
	if (base64_encode(&b, data, len) < 0 || buf_reserve(&b, 0) < 0 ||
	    buf_steal(&b, &enc, &n) < 0)
		return NULL;
	json_t *v = json_pack("{s:s%}", "base64", enc, n);
	free(enc);
	return v;
}

/* The regular file fd (named local), to send ahead as an input for files[dest]. */
static int add_input(struct submit_args *a, int fd, const char *local, const char *dest,
		     uint64_t size, struct error *err)
{
	if (size > SPEC_FILE_INPUT_MAX)
		return error_set(err, EFBIG, "--file: %s: a file may hold at most %llu MiB", local,
				 SPEC_FILE_INPUT_MAX >> 20);
	struct submit_input *in = &a->inputs[a->ninputs];
	*in = (struct submit_input){.fd = fcntl(fd, F_DUPFD_CLOEXEC, 3),
				    .local = strdup(local),
				    .dest = strdup(dest),
				    .size = size};
	a->ninputs++; /* released whatever happens next */
	if (in->fd < 0 || !in->local || !in->dest)
		return error_set_errno(err, in->fd < 0 ? errno : ENOMEM, "--file: %s", local);
	/* its place in files, for the order of the keys; its id once it is sent */
	json_t *files = member(a, "files", false);
	if (!files || json_object_set_new(files, dest, json_null()) < 0)
		return error_set_errno(err, ENOMEM, "building the request");
	return 0;
}

/* Send the inputs, each named in files by the id agentboxd answers with. */
static int send_inputs(struct client *c, struct submit_args *a, struct error *err)
{
	json_t *files = json_object_get(a->body, "files");
	for (size_t i = 0; i < a->ninputs; i++) {
		struct submit_input *in = &a->inputs[i];
		struct cli_upload u = {.fd = in->fd, .name = in->local, .size = in->size};
		struct client_request req = {.method = "POST",
					     .target = "/v1/inputs",
					     .content_type = "application/octet-stream"};
		cli_upload_body(&req, &u);
		_cleanup_json_ json_t *answer = NULL;
		int r = client_request(c, &req, &answer, err);
		if (r < 0)
			return r;
		json_t *id = json_object_get(answer, "id");
		if (!json_is_string(id))
			return error_set(err, EPROTO, "agentboxd's answer to an input has no id");
		if (json_object_set_new(files, in->dest, json_pack("{s:O}", "input", id)) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
	}
	return 0;
}

static void release_inputs(struct submit_args *a)
{
	for (size_t i = 0; i < a->ninputs; i++) {
		if (a->inputs[i].fd >= 0)
			close(a->inputs[i].fd);
		free(a->inputs[i].local);
		free(a->inputs[i].dest);
	}
	a->ninputs = 0;
}

/* Read the regular file fd (named local) into files[dest]. */
static int add_file_fd(struct submit_args *a, int fd, const char *local, const char *dest,
		       struct error *err)
{
	json_t *files = member(a, "files", false);
	if (!files)
		return error_set_errno(err, ENOMEM, "building the request");
	if (json_object_get(files, dest))
		return error_set(err, EINVAL, "--file: %s is given twice", dest);
	if (json_object_size(files) >= SUBMIT_FILES_COUNT_MAX)
		return error_set(err, E2BIG, "--file: more than %u files in all",
				 SUBMIT_FILES_COUNT_MAX);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "--file: %s", local);
	if ((uint64_t)st.st_size > SUBMIT_INLINE_MAX && a->ninputs < TASK_INPUTS_MAX)
		return add_input(a, fd, local, dest, (uint64_t)st.st_size, err);
	size_t left = SUBMIT_FILES_MAX - a->file_bytes;
	if ((uint64_t)st.st_size > left && a->ninputs == TASK_INPUTS_MAX)
		return error_set(err, EFBIG,
				 "--file: %s: %d files are sent ahead already (the most a task "
				 "names), and the others together may hold at most %u MiB",
				 local, TASK_INPUTS_MAX, SUBMIT_FILES_MAX >> 20);
	if ((uint64_t)st.st_size > left)
		return error_set(err, EFBIG,
				 "--file: %s: all files together may hold at most %u MiB", local,
				 SUBMIT_FILES_MAX >> 20);
	/* read one byte more than allowed, in case it grew since fstat */
	_cleanup_free_ char *buf = malloc(left + 1);
	if (!buf)
		return error_set_errno(err, ENOMEM, "--file: %s", local);
	ssize_t n = read_all(fd, buf, left + 1);
	if (n < 0)
		return error_set_errno(err, (int)-n, "--file: %s", local);
	if ((size_t)n > left)
		return error_set(err, EFBIG,
				 "--file: %s: all files together may hold at most %u MiB", local,
				 SUBMIT_FILES_MAX >> 20);
	json_t *content = file_content(buf, (size_t)n);
	if (!content || json_object_set_new(files, dest, content) < 0)
		return error_set_errno(err, ENOMEM, "building the request");
	a->file_bytes += (size_t)n;
	return 0;
}

static int name_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/*
 * Every regular file beneath the directory dirfd (local, dest: its two
 * names, dest without a trailing '/') into files, at dest/<its path>.
 * Symlinks and other special files are left out, with a note on stderr;
 * nothing is followed.
 */
static int add_dir(struct submit_args *a, int dirfd, const char *local, const char *dest,
		   unsigned depth, struct error *err)
{
	if (depth > SUBMIT_DIR_DEPTH_MAX)
		return error_set(err, E2BIG, "--file: %s: more than %u directories deep", local,
				 SUBMIT_DIR_DEPTH_MAX);
	int fd = dup(dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return error_set_errno(err, errno, "--file: %s", local);
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char **more =
		    n < SUBMIT_FILES_COUNT_MAX ? realloc(names, (n + 1) * sizeof(*names)) : NULL;
		if (!more || !(more[n] = strdup(de->d_name))) {
			names = more ? more : names;
			r = more ? error_set_errno(err, ENOMEM, "--file: %s", local)
				 : error_set(err, E2BIG, "--file: %s: more than %u files", local,
					     SUBMIT_FILES_COUNT_MAX);
			break;
		}
		names = more;
		n++;
	}
	closedir(d);
	if (r == 0)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && r == 0; i++) {
		char sub_local[4096], sub_dest[4096];
		if ((size_t)snprintf(sub_local, sizeof(sub_local), "%s/%s", local, names[i]) >=
			sizeof(sub_local) ||
		    (size_t)snprintf(sub_dest, sizeof(sub_dest), "%s/%s", dest, names[i]) >=
			sizeof(sub_dest)) {
			r = error_set(err, ENAMETOOLONG, "--file: %s/%s: too long a path", local,
				      names[i]);
			break;
		}
		_cleanup_close_ int sub = openat(
		    dirfd, names[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		struct stat st;
		if (sub < 0 || fstat(sub, &st) < 0) {
			if (errno == ELOOP || errno == ENXIO || errno == EOPNOTSUPP) {
				fprintf(stderr, "agentbox submit: %s is not a file: not sent\n",
					sub_local);
				continue;
			}
			r = error_set_errno(err, errno, "--file: %s", sub_local);
		} else if (S_ISDIR(st.st_mode)) {
			r = add_dir(a, sub, sub_local, sub_dest, depth + 1, err);
		} else if (S_ISREG(st.st_mode)) {
			r = add_file_fd(a, sub, sub_local, sub_dest, err);
		} else {
			fprintf(stderr, "agentbox submit: %s is not a file: not sent\n", sub_local);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/*
 * --file LOCAL:SANDBOX: a local file into body.files[SANDBOX], as text or
 * base64; a local directory, every file beneath it at SANDBOX/<its path>.
 */
static int add_file(struct submit_args *a, const char *arg, struct error *err)
{
	/* LOCAL:SANDBOX, split where the (absolute) sandbox path starts */
	const char *sep = NULL;
	for (const char *p = strstr(arg, ":/"); p; p = strstr(p + 1, ":/"))
		sep = p;
	if (!sep || sep == arg)
		return error_set(err, EINVAL, "--file: '%s' is not LOCAL:/SANDBOX/PATH", arg);
	_cleanup_free_ char *local = strndup(arg, (size_t)(sep - arg));
	_cleanup_free_ char *dest = strdup(sep + 1);
	if (!local || !dest)
		return error_set_errno(err, ENOMEM, "building the request");
	_cleanup_close_ int fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return error_set_errno(err, errno, "--file: %s", local);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "--file: %s", local);
	if (S_ISDIR(st.st_mode)) {
		size_t len = strlen(dest);
		while (len > 1 && dest[len - 1] == '/')
			dest[--len] = '\0';
		return add_dir(a, fd, local, dest, 0, err);
	}
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "--file: %s is not a regular file or a directory",
				 local);
	return add_file_fd(a, fd, local, dest, err);
}

static int parse_value(int opt, const char *arg, struct submit_args *a, struct error *err)
{
	uint64_t v;
	int r = cli_body_option(a->body, opt, arg, err);
	if (r != -ENOENT)
		return r;
	switch (opt) {
	case OPT_TIMEOUT:
		if ((r = cli_parse_duration("--timeout", arg, &v, err)) < 0)
			return r;
		return cli_body_limit(a->body, "timeout_s", cli_thousandths(v), err);
	case OPT_ATTEMPTS:
		if (parse_u64(arg, &v) < 0 || v == 0 || v > TASK_MAX_ATTEMPTS_MAX)
			return error_set(err, EINVAL,
					 "--attempts: '%s' is not a number from 1 to %d", arg,
					 TASK_MAX_ATTEMPTS_MAX);
		return cli_body_set(a->body, "max_attempts", json_integer((json_int_t)v), err);
	case OPT_RETRY_ON:
		return add_retry_on(a, arg, err);
	case OPT_FILE:
		return add_file(a, arg, err);
	case OPT_ARTIFACT: {
		json_t *list = member(a, "artifacts", true);
		json_t *p = json_string(arg);
		if (!p)
			return error_set(err, EINVAL, "--artifact: '%s' is not UTF-8 text", arg);
		if (!list || json_array_append_new(list, p) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
		return 0;
	}
	case CLI_OPT_SOCKET:
		a->socket_path = arg;
		return 0;
	case 'h':
		a->help = true;
		return 0;
	}
	return error_set(err, EINVAL, "internal: unhandled option");
}

static int parse_args(int argc, char **argv, struct submit_args *a, struct error *err)
{
	opterr = 0;
	optind = 1;
	int opt;
	/* "+": stop at the first non-option, so the command's own flags are its own */
	while ((opt = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
		if (opt == ':')
			return error_set(err, EINVAL, "option '%s' needs a value",
					 argv[optind - 1]);
		if (opt == '?')
			return error_set(err, EINVAL,
					 "unknown option '%s' (see agentbox submit --help)",
					 argv[optind - 1]);
		int r = parse_value(opt, optarg, a, err);
		if (r < 0)
			return r;
	}
	if (a->help)
		return 0;
	int r = cli_body_finish(a->body, err);
	if (r < 0)
		return r;
	if (optind >= argc && json_object_get(a->body, "image"))
		return 0; /* the image's Entrypoint and Cmd */
	if (optind >= argc)
		return error_set(err, EINVAL,
				 "no command given (agentbox submit [OPTIONS] -- COMMAND)");
	json_t *command = json_array();
	if (!command || json_object_set_new(a->body, "command", command) < 0)
		return error_set_errno(err, ENOMEM, "building the request");
	for (int i = optind; i < argc; i++) {
		json_t *s = json_string(argv[i]);
		if (!s)
			return error_set(err, EINVAL, "the command's argument %d is not UTF-8 text",
					 i - optind);
		if (json_array_append_new(command, s) < 0)
			return error_set_errno(err, ENOMEM, "building the request");
	}
	return 0;
}

int verb_submit(int argc, char **argv)
{
	_cleanup_json_ json_t *body = json_object();
	struct submit_args a = {.body = body}; /* borrowed: body owns it */
	struct error err = {0};
	if (!body)
		return cli_fail("submit: out of memory");
	int r = parse_args(argc, argv, &a, &err);
	if (r < 0 || a.help) {
		release_inputs(&a);
		if (r < 0)
			return cli_fail("submit: %s", err.msg);
		fputs(help, stdout);
		return 0;
	}

	struct client c;
	if (client_init(&c, a.socket_path, &err) < 0) {
		release_inputs(&a);
		return cli_fail("submit: %s", err.msg);
	}
	_cleanup_json_ json_t *task = NULL;
	r = send_inputs(&c, &a, &err);
	release_inputs(&a);
	if (r == 0)
		r = client_call(&c, "POST", "/v1/tasks", a.body, &task, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("submit: %s", err.msg);
	const char *id = json_string_value(json_object_get(task, "id"));
	if (!id)
		return cli_fail("submit: agentboxd's answer has no task id");
	if (cli_print_text(id) < 0)
		return cli_fail("submit: cannot write the output");
	return 0;
}
