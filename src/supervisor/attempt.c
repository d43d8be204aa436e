#include "supervisor/attempt.h"

#include "base/base64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "core/id.h"
#include "core/layout.h"
#include "core/limits.h"
#include "supervisor/spec-json.h"
#include "supervisor/state.h"
#include "supervisor/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int load_command(json_t *cmd, struct attempt *a, struct error *err)
{
	size_t n = json_array_size(cmd);
	if (!json_is_array(cmd) || n == 0)
		return error_set(err, EINVAL,
				 "attempt.json: spec.command is not a non-empty array");
	a->argv = calloc(n + 1, sizeof(char *));
	if (!a->argv)
		return error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *arg = json_string_value(json_array_get(cmd, i));
		if (!arg || !(a->argv[i] = strdup(arg)))
			return error_set(err, EINVAL, "attempt.json: spec.command[%zu]", i);
	}
	a->spec.argv = (const char *const *)a->argv;
	a->spec.argc = n;
	return 0;
}

/* The task's env, then what agentbox tells it: where progress goes, which attempt. */
static int load_env(json_t *env, struct attempt *a, struct error *err)
{
	int r = spec_json_env(env, 3, "attempt.json: spec.env", &a->env, err);
	if (r < 0)
		return r;
	size_t i = 0;
	while (a->env[i])
		i++;
	if (asprintf(&a->env[i++], "AGENTBOX_PROGRESS=%s", ATTEMPT_PROGRESS_TARGET) < 0 ||
	    asprintf(&a->env[i++], "AGENTBOX_ATTEMPT=%" PRIu32, a->attempt) < 0 ||
	    asprintf(&a->env[i++], "AGENTBOX_TASK_ID=%s", a->task_id) < 0) {
		a->env[i - 1] = NULL;
		return error_set(err, ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < i; k++) {
		r = spec_add_env(&a->spec, a->env[k]);
		if (r < 0)
			return error_set(err, -r, "attempt.json: too many env entries");
	}
	return 0;
}

/*
 * An input of the task: its file in the task's inputs/ (tasks_fd: the
 * task's directory), open once however many files read it, above init's
 * own fds. The fd is the attempt's (a->input_fds).
 */
static int open_input(struct attempt *a, int task_fd, const char *id, struct error *err)
{
	for (size_t k = 0; k < a->ninputs; k++)
		if (strcmp(a->input_ids[k], id) == 0)
			return a->input_fds[k];
	if (!id_is_valid(INPUT_ID_PREFIX, id))
		return error_set(err, EINVAL, "attempt.json: '%s' is not an input's id", id);
	if (a->ninputs == TASK_INPUTS_MAX)
		return error_set(err, E2BIG, "attempt.json: more than %d inputs", TASK_INPUTS_MAX);
	char name[256];
	if ((size_t)snprintf(name, sizeof(name), "%s/%s", LAYOUT_INPUTS, id) >= sizeof(name))
		return error_set(err, EINVAL, "attempt.json: input %s", id);
	_cleanup_close_ int fd = openat(task_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return error_set_errno(err, errno, "the task's input %s", id);
	int high = fcntl(fd, F_DUPFD_CLOEXEC, SPEC_FILE_FD_MIN);
	if (high < 0)
		return error_set_errno(err, errno, "the task's input %s", id);
	snprintf(a->input_ids[a->ninputs], sizeof(a->input_ids[0]), "%s", id);
	a->input_fds[a->ninputs++] = high;
	return high;
}

/* {"input": ID, "offset": O, "size": N}: N bytes of the task's input ID from O. */
static int load_input(json_t *content, struct attempt *a, int task_fd, const char *path,
		      struct spec_file *f, struct error *err)
{
	const char *id = json_string_value(json_object_get(content, "input"));
	json_t *off = json_object_get(content, "offset"), *size = json_object_get(content, "size");
	if (!id || !json_is_integer(off) || !json_is_integer(size) || json_integer_value(off) < 0 ||
	    json_integer_value(size) < 0 ||
	    (uint64_t)json_integer_value(size) > SPEC_FILE_INPUT_MAX)
		return error_set(err, EINVAL, "attempt.json: spec.files.%s", path);
	int fd = open_input(a, task_fd, id, err);
	if (fd < 0)
		return fd;
	struct stat st;
	uint64_t o = (uint64_t)json_integer_value(off), n = (uint64_t)json_integer_value(size);
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < o || (uint64_t)st.st_size - o < n)
		return error_set(err, EIO, "the task's input %s is shorter than its files", id);
	char *p = strdup(path);
	if (!p)
		return error_set(err, ENOMEM, "out of memory");
	*f = (struct spec_file){.path = p, .len = n, .from_fd = true, .fd = fd, .offset = o};
	return 0;
}

static int load_files(json_t *files, const char *dir, struct attempt *a, struct error *err)
{
	size_t n = json_object_size(files), i = 0;
	if (n == 0)
		return 0;
	a->files = calloc(n, sizeof(*a->files));
	if (!a->files)
		return error_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int task_fd = -1;
	const char *path;
	json_t *content;
	json_object_foreach(files, path, content)
	{
		if (json_object_get(content, "input")) {
			/* dir is the attempt's: the task's is its parent */
			if (task_fd < 0 &&
			    (task_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
				int t = openat(task_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
				close(task_fd);
				task_fd = t;
			}
			if (task_fd < 0)
				return error_set_errno(err, errno, "open the task's directory");
			int r = load_input(content, a, task_fd, path, &a->files[i], err);
			if (r < 0)
				return r;
			a->spec.files = a->files;
			a->spec.nfiles = ++i;
			continue;
		}
		/* a string (text), or {"base64": ...} (any bytes): the API checked both */
		json_t *b64 = json_object_get(content, "base64");
		struct buf b = {.max = SPEC_FILES_BYTES_MAX};
		if (json_is_string(content))
			buf_append(&b, json_string_value(content), json_string_length(content));
		else if (json_is_string(b64))
			base64_decode(&b, json_string_value(b64), json_string_length(b64));
		else
			return error_set(err, EINVAL, "attempt.json: spec.files.%s", path);
		char *data = NULL, *p = NULL;
		size_t len = 0;
		buf_reserve(&b, 0);
		if (buf_steal(&b, &data, &len) < 0) {
			buf_release(&b);
			return error_set(err, EINVAL, "attempt.json: spec.files.%s", path);
		}
		if (!(p = strdup(path))) {
			free(data);
			return error_set(err, ENOMEM, "out of memory");
		}
		a->files[i++] = (struct spec_file){.path = p, .data = data, .len = len};
		a->spec.files = a->files;
		a->spec.nfiles = i;
	}
	a->spec.files = a->files;
	a->spec.nfiles = i;
	return 0;
}

int attempt_load(const char *dir, int dirfd, struct attempt *a, struct error *err)
{
	*a = (struct attempt){.image.use_fd = -1};
	spec_init(&a->spec);
	_cleanup_json_ json_t *root = supervise_read_json(dirfd, LAYOUT_ATTEMPT_JSON, err);
	if (!root)
		return -err->code;
	int r;
	json_t *spec = json_object_get(root, "spec");
	const char *id = json_string_value(json_object_get(root, "task_id"));
	json_t *attempt = json_object_get(root, "attempt");
	if (!id || strlen(id) >= sizeof(a->task_id) || !json_is_integer(attempt) ||
	    !json_is_object(spec))
		return error_set(err, EINVAL, "attempt.json: needs task_id, attempt and spec");
	snprintf(a->task_id, sizeof(a->task_id), "%s", id);
	a->attempt = (uint32_t)json_integer_value(attempt);
	spec_json_limits(json_object_get(spec, "limits"), &a->spec);
	/* dir is <state>/tasks/<id>/attempt-<N> (attempt.h): the store is <state>/images */
	char state_dir[PATH_MAX];
	snprintf(state_dir, sizeof(state_dir), "%s/../../..", dir);
	if ((r = spec_json_image(spec, state_dir, &a->image, &a->spec, err)) < 0)
		return r;
	snprintf(a->network_log, sizeof(a->network_log), "%s/%s", dir, LAYOUT_NETWORK_LOG);
	/* the task's secrets, kept beside its attempts until it ends */
	char secrets[PATH_MAX];
	snprintf(secrets, sizeof(secrets), "%s/../%s", dir, LAYOUT_SECRETS);
	int secrets_fd = 0;
	if ((r = spec_json_secrets(spec, secrets, false, &secrets_fd, err)) < 0)
		return r;
	if ((r = spec_json_network(json_object_get(spec, "network"),
				   json_object_get(root, "egress"), secrets_fd, a->network_log,
				   &a->net, &a->spec, err)) < 0) {
		if (secrets_fd > 0)
			close(secrets_fd);
		return r;
	}
	if ((r = load_command(json_object_get(spec, "command"), a, err)) < 0 ||
	    (r = load_env(json_object_get(spec, "env"), a, err)) < 0 ||
	    (r = load_files(json_object_get(spec, "files"), dir, a, err)) < 0)
		return r;
	json_t *artifacts = json_object_get(spec, "artifacts");
	if (json_array_size(artifacts) > 0) {
		a->artifacts = json_incref(artifacts);
		a->spec.export_dirs = true;
	}
	/* the task's state image is /state; the FIFO in this directory is the progress channel */
	char task_dir[1024];
	bool image;
	snprintf(task_dir, sizeof(task_dir), "%s/..", dir);
	a->state_bytes = spec_json_state_bytes(json_object_get(spec, "limits"));
	if ((r = state_prepare(task_dir, a->state_bytes, a->state_path, sizeof(a->state_path),
			       &image, err)) < 0)
		return r;
	snprintf(a->progress_fifo, sizeof(a->progress_fifo), "%s/progress", dir);
	a->volumes[0] =
	    (struct volume){.host = a->state_path, .target = ATTEMPT_STATE_TARGET, .image = image};
	a->volumes[1] =
	    (struct volume){.host = a->progress_fifo, .target = ATTEMPT_PROGRESS_TARGET};
	/* after those the network added (the CA of a task with secrets) */
	for (size_t i = 0; i < 2; i++) {
		size_t k = a->spec.nvolumes;
		struct volume *n = realloc(a->spec.volumes, (k + 1) * sizeof(*n));
		if (!n)
			return error_set(err, ENOMEM, "out of memory");
		n[k] = a->volumes[i];
		a->spec.volumes = n;
		a->spec.nvolumes = k + 1;
	}
	return 0;
}

void attempt_release(struct attempt *a)
{
	spec_release(&a->spec);
	spec_network_release(&a->net);
	spec_image_release(&a->image);
	for (char **p = a->argv; p && *p; p++)
		free(*p);
	free(a->argv);
	strv_free(a->env);
	for (size_t i = 0; i < a->spec.nfiles; i++) {
		free((char *)a->files[i].path);
		free((char *)a->files[i].data);
	}
	free(a->files);
	for (size_t k = 0; k < a->ninputs; k++)
		close(a->input_fds[k]);
	json_decref(a->artifacts);
	*a = (struct attempt){.image.use_fd = -1};
}

static const char *end_name(const struct sandbox_result *r)
{
	switch (r->end) {
	case SANDBOX_EXITED:
		return r->exit_status == 0 ? "succeeded" : "failed";
	case SANDBOX_OOM_KILLED:
		return "oom_killed";
	case SANDBOX_TIMED_OUT:
		return "timed_out";
	case SANDBOX_CANCELLED:
		return "cancelled";
	case SANDBOX_SIGNALED:
	case SANDBOX_EXEC_FAILED:
	case SANDBOX_SETUP_FAILED:
		break;
	}
	return "failed";
}

/* The exit code a task reports: as `agentbox run` would exit. */
static json_t *exit_code_of(const struct sandbox_result *r)
{
	switch (r->end) {
	case SANDBOX_EXITED:
		return json_integer(r->exit_status);
	case SANDBOX_SIGNALED:
		return json_integer(128 + r->term_signal);
	case SANDBOX_OOM_KILLED:
		return json_integer(137);
	case SANDBOX_TIMED_OUT:
		return json_integer(124);
	case SANDBOX_EXEC_FAILED:
		return json_integer(r->exec_errno == ENOENT ? 127 : 126);
	case SANDBOX_CANCELLED:
	case SANDBOX_SETUP_FAILED:
		break;
	}
	return json_null();
}

int attempt_write_result(int dirfd, const struct sandbox_result *res, const char *error,
			 const struct attempt_counts *c)
{
	_cleanup_json_ json_t *j = json_pack(
	    "{s:s, s:o, s:o, s:o, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "end",
	    end_name(res), "exit_code", exit_code_of(res), "signal",
	    res->term_signal ? json_integer(res->term_signal) : json_null(), "error",
	    error ? json_string(error) : json_null(), "oom_killed", res->oom_killed, "wall_ms",
	    (json_int_t)res->wall_ms, "cpu_ms", (json_int_t)res->cpu_ms, "peak_memory_bytes",
	    (json_int_t)res->peak_memory_bytes, "progress_lines", (json_int_t)c->progress_lines,
	    "malformed_progress", (json_int_t)c->malformed_progress, "oversized_progress",
	    (json_int_t)c->oversized_progress, "dropped_progress", (json_int_t)c->dropped_progress,
	    "output_bytes", (json_int_t)c->output_bytes, "output_dropped",
	    (json_int_t)c->output_dropped);
	if (!j ||
	    json_object_set_new(j, "egress_denied", json_integer((json_int_t)c->egress_denied)) <
		0 ||
	    json_object_set_new(j, "network_bytes_in",
				json_integer((json_int_t)c->network_bytes_in)) < 0 ||
	    json_object_set_new(j, "network_bytes_out",
				json_integer((json_int_t)c->network_bytes_out)) < 0)
		return -ENOMEM;
	return supervise_write_json(dirfd, LAYOUT_RESULT, j, true);
}
