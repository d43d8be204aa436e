#include "supervisor/progress.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int accept_line(struct progress *p)
{
	p->line[p->len] = '\0';
	json_error_t jerr;
	_cleanup_json_ json_t *obj = json_loadb(p->line, p->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj || !json_is_object(obj)) {
		p->malformed++;
		return 0;
	}
	_cleanup_free_ char *data = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!data)
		return -ENOMEM;
	_cleanup_free_ char *rec = NULL;
	int n = asprintf(&rec, "{\"line\":%" PRIu64 ",\"time\":%" PRId64 ",\"data\":%s}\n",
			 p->accepted + 1, p->now_ms(), data);
	if (n < 0)
		return -ENOMEM;
	if (p->events->size + (uint64_t)n > p->events->cap) {
		p->dropped++; /* whole lines only: the journal never ends mid-line */
		return 0;
	}
	int r = journal_append(p->events, rec, (size_t)n);
	if (r == 0)
		p->accepted++;
	return r;
}

int progress_egress(struct progress *p, const char *line, size_t len)
{
	_cleanup_json_ json_t *obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(obj) ||
	    strcmp(json_string_value(json_object_get(obj, "type")) ?: "", "egress_denied") != 0)
		return 0;
	json_int_t t = json_integer_value(json_object_get(obj, "time"));
	json_object_del(obj, "type");
	json_object_del(obj, "time");
	_cleanup_free_ char *data = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!data)
		return -ENOMEM;
	_cleanup_free_ char *rec = NULL;
	int n = asprintf(&rec,
			 "{\"line\":%" PRIu64 ",\"time\":%" PRId64
			 ",\"type\":\"egress_denied\",\"data\":%s}\n",
			 p->accepted + 1, t > 0 ? (int64_t)t : p->now_ms(), data);
	if (n < 0)
		return -ENOMEM;
	if (p->events->size + (uint64_t)n > p->events->cap)
		return 0; /* past the cap: the relay's own file keeps it */
	int r = journal_append(p->events, rec, (size_t)n);
	if (r == 0) {
		p->accepted++;
		p->egress++;
	}
	return r;
}

static int end_line(struct progress *p)
{
	int r = 0;
	if (p->skipping)
		p->skipping = false;
	else if (p->len > 0)
		r = accept_line(p);
	p->len = 0;
	return r;
}

int progress_feed(struct progress *p, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			int r = end_line(p);
			if (r < 0)
				return r;
			continue;
		}
		if (p->skipping)
			continue;
		if (p->len == PROGRESS_LINE_MAX) {
			p->oversized++;
			p->skipping = true;
			p->len = 0;
			continue;
		}
		p->line[p->len++] = buf[i];
	}
	return 0;
}

int progress_finish(struct progress *p)
{
	return end_line(p);
}
