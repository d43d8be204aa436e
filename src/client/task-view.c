/*
 * task-view.c - what the client verbs share about tasks and sandboxes: ids
 * in paths, exit statuses, and compact one-line views (client.h). Which
 * statuses exist and which are final is core's (core/task.h).
 */
#include "client/client.h"

#include "base/cleanup.h"
#include "base/parse.h"
#include "core/task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool client_id_is_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > CLIENT_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
		if (!ok)
			return false;
	}
	return true;
}

static int id_target(char *buf, size_t size, const char *collection, const char *what,
		     const char *id, const char *suffix, struct error *err)
{
	if (!client_id_is_valid(id))
		return error_set(err, EINVAL, "'%.*s%s' is not a %s id", CLIENT_ID_MAX, id,
				 strlen(id) > CLIENT_ID_MAX ? "..." : "", what);
	int w = snprintf(buf, size, "/v1/%s/%s%s", collection, id, suffix ? suffix : "");
	if (w < 0 || (size_t)w >= size)
		return error_set(err, ENAMETOOLONG, "internal: the request path is too long");
	return 0;
}

int client_task_target(char *buf, size_t size, const char *id, const char *suffix,
		       struct error *err)
{
	return id_target(buf, size, "tasks", "task", id, suffix, err);
}

int client_sandbox_target(char *buf, size_t size, const char *id, const char *suffix,
			  struct error *err)
{
	return id_target(buf, size, "sandboxes", "sandbox", id, suffix, err);
}

int client_sandbox_file_target(const char *id, const char *path, char **ret, struct error *err)
{
	char base[CLIENT_TARGET_MAX];
	int r = client_sandbox_target(base, sizeof(base), id, "/files?path=", err);
	if (r < 0)
		return r;
	size_t blen = strlen(base);
	size_t need = http_query_escape(path, NULL, 0);
	char *t = malloc(blen + need + 1);
	if (!t)
		return error_set_errno(err, ENOMEM, "building the request");
	memcpy(t, base, blen);
	http_query_escape(path, t + blen, need + 1);
	*ret = t;
	return 0;
}

int client_status_exit_code(const char *status)
{
	enum task_status s;
	if (task_status_parse(status, &s) < 0 || !task_status_is_final(s))
		return -1;
	/* no default: a status core adds must be given its exit status here */
	switch (s) {
	case TASK_SUCCEEDED:
		return 0;
	case TASK_FAILED:
		return 1;
	case TASK_OOM_KILLED:
		return 137;
	case TASK_TIMED_OUT:
		return 124;
	case TASK_CANCELLED:
		return 130;
	case TASK_LOST:
		return 3;
	case TASK_QUEUED:
	case TASK_RUNNING:
	case TASK_STATUS_COUNT:
		break;
	}
	return -1;
}

bool client_status_is_final(const char *status)
{
	enum task_status s;
	return task_status_parse(status, &s) == 0 && task_status_is_final(s);
}

int client_print_json(FILE *f, const json_t *json)
{
	_cleanup_free_ char *text =
	    json_dumps(json, JSON_INDENT(2) | JSON_REAL_PRECISION(15) | JSON_ENCODE_ANY);
	if (!text)
		return -EIO;
	/* the same JSON, with what a terminal would obey spelled as \uXXXX */
	_cleanup_buf_ struct buf b = {0};
	if (term_escape(text, strlen(text), TERM_JSON | TERM_KEEP_NEWLINE, &b) < 0 ||
	    buf_puts(&b, "\n") < 0)
		return -EIO;
	if (fwrite(b.data, 1, b.len, f) != b.len)
		return -EIO;
	return 0;
}

void client_view_progress(struct term_line *l, const json_t *progress)
{
	const char *key;
	json_t *value;
	bool first = true;
	json_object_foreach((json_t *)progress, key, value)
	{
		if (!first)
			term_line_adds(l, " ");
		first = false;
		term_line_adds(l, key);
		term_line_adds(l, "=");
		if (json_is_string(value)) {
			term_line_add(l, json_string_value(value), json_string_length(value));
		} else {
			char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY |
							   JSON_REAL_PRECISION(15));
			term_line_adds(l, text ? text : "?");
			free(text);
		}
	}
}

void client_format_progress(const json_t *progress, char *buf, size_t size)
{
	struct term_line l;
	term_line_init(&l, buf, size);
	client_view_progress(&l, progress);
}

void client_format_command(const json_t *command, char *buf, size_t size)
{
	struct term_line l;
	term_line_init(&l, buf, size);
	size_t i;
	json_t *arg;
	json_array_foreach(command, i, arg)
	{
		const char *s = json_string_value(arg);
		if (!s)
			continue;
		if (i > 0)
			term_line_adds(&l, " ");
		bool quote = !*s || strpbrk(s, " \t'\"") != NULL;
		if (quote)
			term_line_adds(&l, "'");
		term_line_add(&l, s, json_string_length(arg));
		if (quote)
			term_line_adds(&l, "'");
	}
}

int client_parse_time(const char *s, int64_t *ret_ms)
{
	return parse_rfc3339_ms(s, ret_ms);
}

void client_format_age(int64_t ms, char *buf, size_t size)
{
	int64_t s = ms > 0 ? ms / 1000 : 0;
	if (s < 60)
		snprintf(buf, size, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(buf, size, "%lldm", (long long)(s / 60));
	else if (s < 48 * 3600)
		snprintf(buf, size, "%lldh", (long long)(s / 3600));
	else
		snprintf(buf, size, "%lldd", (long long)(s / 86400));
}
