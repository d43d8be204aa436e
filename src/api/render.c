/*
 * render.c - tasks and events as the API shows them.
 *
 * JSON the store already holds (a task's progress, an event's data, the
 * parts of the canonical spec) is copied as raw text, never re-parsed:
 * the store validated it, and a number keeps every digit it had.
 */
#include "api/api-internal.h"
#include "core/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* "2024-05-01T12:00:00.123Z" into buf; false for a moment the API shows as null. */
static bool format_time(int64_t ms, char buf[32])
{
	struct tm tm;
	time_t sec = (time_t)(ms / 1000);
	if (ms <= 0 || !gmtime_r(&sec, &tm) || tm.tm_year + 1900 > 9999)
		return false;
	snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return true;
}

void api_render_time(struct buf *b, int64_t ms)
{
	char buf[32];
	if (format_time(ms, buf))
		buf_printf(b, "\"%s\"", buf);
	else
		buf_puts(b, "null");
}

json_t *api_time_json(int64_t ms)
{
	char buf[32];
	return format_time(ms, buf) ? json_string(buf) : json_null();
}

/* The member key of the stored spec, raw, or null if it has none. */
static void spec_member(struct buf *b, const char *spec_json, const char *key)
{
	const char *v;
	size_t len;
	if (json_member_raw(spec_json, key, &v, &len) == 0)
		buf_append(b, v, len);
	else
		buf_puts(b, "null");
}

void api_render_network(struct buf *b, const char *spec_json)
{
	const char *v;
	size_t len;
	if (spec_json && json_member_raw(spec_json, "network", &v, &len) == 0)
		buf_append(b, v, len);
	else
		buf_puts(b, "{\"mode\":\"none\"}");
}

void api_render_secrets(struct buf *b, const char *spec_json)
{
	const char *v;
	size_t len;
	if (spec_json && json_member_raw(spec_json, "secrets", &v, &len) == 0) {
		buf_puts(b, ",\"secrets\":");
		buf_append(b, v, len);
	}
}

void api_render_image(struct buf *b, const char *spec_json)
{
	static const char *const keys[] = {"image", "user", "cwd"};
	for (size_t i = 0; spec_json && i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *v;
		size_t len;
		if (json_member_raw(spec_json, keys[i], &v, &len) == 0) {
			buf_printf(b, ",\"%s\":", keys[i]);
			buf_append(b, v, len);
		}
	}
}

/*
 * What the task's attempts refused of its progress channel, summed from
 * their result.json files (written by the supervisor at each attempt's end).
 */
static void render_rejected(struct buf *b, const char *state_dir, const struct task *t)
{
	json_int_t malformed = 0, oversized = 0, dropped = 0, in = 0, out = 0, denied = 0;
	for (uint32_t a = 1; a <= t->attempt; a++) {
		char path[4400];
		json_t *r =
		    layout_attempt_file(path, sizeof(path), state_dir, t->id, a, LAYOUT_RESULT) == 0
			? json_load_file(path, 0, NULL)
			: NULL;
		malformed += json_integer_value(json_object_get(r, "malformed_progress"));
		oversized += json_integer_value(json_object_get(r, "oversized_progress"));
		dropped += json_integer_value(json_object_get(r, "dropped_progress"));
		in += json_integer_value(json_object_get(r, "network_bytes_in"));
		out += json_integer_value(json_object_get(r, "network_bytes_out"));
		denied += json_integer_value(json_object_get(r, "egress_denied"));
		json_decref(r);
	}
	buf_printf(
	    b, ",\"progress_rejected\":{\"malformed\":%lld,\"oversized\":%lld,\"dropped\":%lld}",
	    (long long)malformed, (long long)oversized, (long long)dropped);
	/* the attempts that ended, added up; a running one counts once it has */
	buf_printf(b, ",\"network_usage\":{\"bytes_in\":%lld,\"bytes_out\":%lld,\"denied\":%lld}",
		   (long long)in, (long long)out, (long long)denied);
}

void api_render_task(struct buf *b, const struct task *t, const char *state_dir)
{
	buf_puts(b, "{\"id\":");
	json_put_strz(b, t->id);
	buf_puts(b, ",\"tenant\":");
	json_put_strz(b, t->tenant);
	buf_puts(b, ",\"status\":");
	json_put_str_or_null(b, task_status_name(t->status));
	buf_printf(b, ",\"attempt\":%u,\"max_attempts\":%u,\"retry_on\":[", t->attempt,
		   t->max_attempts);
	bool first = true;
	for (int s = 0; s < TASK_STATUS_COUNT; s++)
		if (t->retry_on & TASK_STATUS_BIT(s)) {
			buf_puts(b, first ? "\"" : ",\"");
			buf_puts(b, task_status_name((enum task_status)s));
			buf_puts(b, "\"");
			first = false;
		}
	buf_printf(
	    b, "],\"cancel_requested\":%s,\"exit_code\":", t->cancel_requested ? "true" : "false");
	if (t->exit_code >= 0)
		buf_printf(b, "%d", t->exit_code);
	else
		buf_puts(b, "null");
	buf_puts(b, ",\"error\":");
	json_put_str_or_null(b, t->error);
	buf_puts(b, ",\"created_at\":");
	api_render_time(b, t->created_at);
	buf_puts(b, ",\"started_at\":");
	api_render_time(b, t->started_at);
	buf_puts(b, ",\"finished_at\":");
	api_render_time(b, t->finished_at);
	buf_puts(b, ",\"command\":");
	spec_member(b, t->spec_json, "command");
	buf_puts(b, ",\"limits\":");
	spec_member(b, t->spec_json, "limits");
	buf_puts(b, ",\"network\":");
	api_render_network(b, t->spec_json);
	api_render_secrets(b, t->spec_json);
	api_render_image(b, t->spec_json);
	buf_puts(b, ",\"metadata\":");
	spec_member(b, t->spec_json, "metadata");
	buf_puts(b, ",\"progress\":");
	buf_puts(b, t->progress_json && *t->progress_json ? t->progress_json : "{}");
	if (state_dir)
		render_rejected(b, state_dir, t);
	buf_puts(b, "}");
}

void api_render_event(struct buf *b, const struct task_event *ev)
{
	buf_printf(b, "{\"seq\":%lld,\"attempt\":%u,\"type\":", (long long)ev->seq, ev->attempt);
	json_put_str_or_null(b, task_event_type_name(ev->type));
	buf_puts(b, ",\"data\":");
	buf_puts(b, ev->data_json && *ev->data_json ? ev->data_json : "null");
	buf_puts(b, ",\"time\":");
	api_render_time(b, ev->time);
	buf_puts(b, "}");
}

int api_event_json(const struct task_event *ev, char **ret, size_t *ret_len)
{
	struct buf b = {0};
	api_render_event(&b, ev);
	return buf_steal(&b, ret, ret_len);
}
