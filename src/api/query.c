/*
 * query.c - query strings: split, percent-decode, check against the
 * parameters a route takes.
 */
#include "api/api-internal.h"
#include "base/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool api_percent_decode(char *s)
{
	char *out = s;
	for (; *s; s++) {
		if (*s == '+') {
			*out++ = ' ';
		} else if (*s == '%') {
			int hi = hex_value(s[1]), lo = hi < 0 ? -1 : hex_value(s[2]);
			if (lo < 0 || (hi == 0 && lo == 0))
				return false;
			*out++ = (char)(hi << 4 | lo);
			s += 2;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
	return true;
}

static bool is_allowed(const char *const *allowed, const char *name)
{
	for (; allowed && *allowed; allowed++)
		if (strcmp(*allowed, name) == 0)
			return true;
	return false;
}

int api_query_each(char *s,
		   int (*each)(const char *name, const char *value, void *data,
			       struct api_error *e),
		   void *data, struct api_error *e)
{
	char *save = NULL;
	for (char *part = strtok_r(s, "&", &save); part; part = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(part, '=');
		char *value = part + strlen(part); /* no '=': an empty value */
		if (eq) {
			*eq = '\0';
			value = eq + 1;
		}
		if (!api_percent_decode(part) || !api_percent_decode(value))
			return api_error_set(e, API_ERR_INVALID_FIELD, "query",
					     "the query string has a bad %%-escape");
		if (!*part)
			return api_error_set(e, API_ERR_INVALID_FIELD, "query",
					     "the query string has a parameter without a name");
		int r = each(part, value, data, e);
		if (r < 0)
			return r;
	}
	return 0;
}

struct parse_into {
	const char *const *allowed;
	struct api_query *q;
};

/* One parameter into q: allowed, once, within API_QUERY_PARAMS_MAX. */
static int put_param(const char *name, const char *value, void *data, struct api_error *e)
{
	struct parse_into *p = data;
	struct api_query *q = p->q;
	char field[API_FIELD_MAX];
	api_field_key(field, "", name);
	if (!is_allowed(p->allowed, name))
		return api_error_set(e, API_ERR_UNKNOWN_FIELD, field,
				     "this route takes no query parameter %s", field);
	if (api_query_get(q, name))
		return api_error_set(e, API_ERR_INVALID_FIELD, field,
				     "query parameter %s is given twice", field);
	if (q->n == API_QUERY_PARAMS_MAX)
		return api_error_set(e, API_ERR_INVALID_FIELD, "query",
				     "more than %d query parameters", API_QUERY_PARAMS_MAX);
	/* name and value point into q->storage, which api_query_each() wrote */
	q->v[q->n].name = name;
	q->v[q->n].value = value;
	q->n++;
	return 0;
}

int api_query_parse(const char *query, const char *const *allowed, struct api_query *ret,
		    struct api_error *e)
{
	memset(ret, 0, sizeof(*ret));
	if (!query || !*query)
		return 0;
	size_t len = strlen(query);
	if (len > API_QUERY_MAX)
		return api_error_set(e, API_ERR_INVALID_FIELD, "query",
				     "the query string is longer than %d bytes", API_QUERY_MAX);
	ret->storage = strdup(query);
	if (!ret->storage)
		return -ENOMEM;
	struct parse_into p = {.allowed = allowed, .q = ret};
	int r = api_query_each(ret->storage, put_param, &p, e);
	if (r < 0)
		api_query_release(ret);
	return r;
}

const char *api_query_get(const struct api_query *q, const char *name)
{
	for (size_t i = 0; i < q->n; i++)
		if (strcmp(q->v[i].name, name) == 0)
			return q->v[i].value;
	return NULL;
}

void api_query_release(struct api_query *q)
{
	free(q->storage);
	memset(q, 0, sizeof(*q));
}

int api_query_int(const struct api_query *q, const char *name, int64_t min, int64_t max,
		  int64_t def, int64_t *ret, struct api_error *e)
{
	const char *s = api_query_get(q, name);
	if (!s) {
		*ret = def;
		return 0;
	}
	uint64_t v;
	if (parse_u64(s, &v) < 0 || v < (uint64_t)min || v > (uint64_t)max)
		return api_error_set(e, API_ERR_INVALID_FIELD, name,
				     "%s must be an integer from %lld to %lld", name,
				     (long long)min, (long long)max);
	*ret = (int64_t)v;
	return 0;
}

int api_query_flag(const struct api_query *q, const char *name, bool *ret, struct api_error *e)
{
	const char *v = api_query_get(q, name);
	if (!v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0) {
		*ret = false;
		return 0;
	}
	if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) {
		*ret = true;
		return 0;
	}
	return api_error_set(e, API_ERR_INVALID_FIELD, name, "%s must be 0, 1, true or false",
			     name);
}
