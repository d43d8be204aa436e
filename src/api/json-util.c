/*
 * json-util.c - the canonical JSON writer, the pre-check of what a parse
 * may cost, and a raw member scanner for the JSON we stored ourselves.
 * See json-util.h.
 */
#include "api/json-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nesting the writer follows before it gives up (-E2BIG). Parsed input is
 * capped far below this (TASK_REQUEST_DEPTH_MAX). */
#define JSON_WRITE_DEPTH_MAX 512

/* Length of the well-formed UTF-8 sequence at p (avail bytes left), or 0. */
static size_t utf8_seq_len(const unsigned char *p, size_t avail)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		if (p[0] == 0xe0)
			lo = 0xa0; /* overlong */
		if (p[0] == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		if (p[0] == 0xf0)
			lo = 0x90; /* overlong */
		if (p[0] == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	if (avail < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

bool utf8_is_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len(p + i, n - i);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

void json_put_str(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0; /* start of the bytes not yet copied */
	buf_append(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		size_t k = c >= 0x20 && c != '"' && c != '\\' ? utf8_seq_len(p + i, n - i) : 0;
		if (k > 0) {
			i += k;
			continue;
		}
		buf_append(b, s + run, i - run);
		switch (c) {
		case '"':
			buf_append(b, "\\\"", 2);
			break;
		case '\\':
			buf_append(b, "\\\\", 2);
			break;
		case '\n':
			buf_append(b, "\\n", 2);
			break;
		case '\r':
			buf_append(b, "\\r", 2);
			break;
		case '\t':
			buf_append(b, "\\t", 2);
			break;
		default:
			if (c < 0x20)
				buf_printf(b, "\\u%04x", c);
			else
				buf_append(b, "\xef\xbf\xbd", 3); /* U+FFFD for a bad byte */
		}
		run = ++i;
	}
	buf_append(b, s + run, n - run);
	buf_append(b, "\"", 1);
}

void json_put_str_or_null(struct buf *b, const char *s)
{
	if (s)
		json_put_strz(b, s);
	else
		buf_puts(b, "null");
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void write_real(struct buf *b, double d)
{
	char tmp[40];
	if (d != d || d - d != 0) { /* NaN or infinite: jansson never makes one */
		buf_puts(b, "null");
		return;
	}
	int prec = 1;
	for (; prec < 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	/* %g turns 100 into 1e+02: below 1e17, write whole digits instead */
	snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
	long exp10 = strtol(strchr(tmp, 'e') + 1, NULL, 10);
	if (exp10 >= prec && exp10 < 17)
		prec = (int)exp10 + 1;
	snprintf(tmp, sizeof(tmp), "%.*g", prec, d);
	buf_puts(b, tmp);
	if (!strpbrk(tmp, ".eE"))
		buf_append(b, ".0", 2);
}

static void write_value(struct buf *b, const json_t *v, int depth)
{
	if (depth > JSON_WRITE_DEPTH_MAX) {
		buf_fail(b, -E2BIG);
		return;
	}
	json_t *m = (json_t *)v; /* jansson's iteration macros take non-const */
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		size_t n = json_object_size(v), i = 0;
		const char **keys = n ? calloc(n, sizeof(*keys)) : NULL;
		if (n && !keys) {
			buf_fail(b, -ENOMEM);
			return;
		}
		const char *key;
		json_t *val;
		json_object_foreach(m, key, val) keys[i++] = key;
		if (n)
			qsort(keys, n, sizeof(*keys), key_cmp);
		buf_append(b, "{", 1);
		for (i = 0; i < n && !b->failed; i++) {
			if (i)
				buf_append(b, ",", 1);
			json_put_strz(b, keys[i]);
			buf_append(b, ":", 1);
			write_value(b, json_object_get(v, keys[i]), depth + 1);
		}
		buf_append(b, "}", 1);
		free(keys);
		break;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *val;
		buf_append(b, "[", 1);
		json_array_foreach(m, i, val)
		{
			if (b->failed)
				break;
			if (i)
				buf_append(b, ",", 1);
			write_value(b, val, depth + 1);
		}
		buf_append(b, "]", 1);
		break;
	}
	case JSON_STRING:
		json_put_str(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		write_real(b, json_real_value(v));
		break;
	case JSON_TRUE:
		buf_puts(b, "true");
		break;
	case JSON_FALSE:
		buf_puts(b, "false");
		break;
	case JSON_NULL:
		buf_puts(b, "null");
		break;
	}
}

void json_put(struct buf *b, const json_t *v)
{
	if (v)
		write_value(b, v, 0);
	else
		buf_puts(b, "null");
}

/*
 * Values are counted where they start: the first one (the root), the
 * first child of an array or object (anything but its closing bracket
 * right after the opening one), and each child after a comma. For JSON
 * text that is exactly 1 + commas + non-empty containers; an object's
 * member counts once, by its key.
 */
enum json_excess json_limits_check(const char *s, size_t n, const struct json_limits *lim)
{
	size_t depth = 0, values = 0;
	bool in_string = false, opened = false; /* opened: just past a '[' or '{' */
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		if (values == 0 || c == ',' || (opened && c != ']' && c != '}'))
			if (++values > lim->values_max)
				return JSON_TOO_MANY_VALUES;
		opened = false;
		if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > lim->depth_max)
				return JSON_TOO_DEEP;
			opened = true;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return JSON_WITHIN_LIMITS;
}

/* ---- scanning stored JSON ---------------------------------------------- */

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* p at an opening quote; returns just past the closing one, or NULL. */
static const char *skip_string(const char *p)
{
	for (p++; *p != '"'; p++) {
		if (*p == '\0')
			return NULL;
		if (*p == '\\' && *++p == '\0')
			return NULL;
	}
	return p + 1;
}

/* p at a value; returns just past it, or NULL if the text ends first. */
static const char *skip_value(const char *p)
{
	if (*p == '"')
		return skip_string(p);
	if (*p != '{' && *p != '[') {
		const char *start = p;
		while (*p && !strchr(",}] \t\n\r", *p))
			p++;
		return p > start ? p : NULL;
	}
	size_t depth = 0;
	for (;;) {
		if (*p == '"') {
			p = skip_string(p);
			if (!p)
				return NULL;
			continue;
		}
		if (*p == '\0')
			return NULL;
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
}

int json_member_raw(const char *json, const char *key, const char **ret, size_t *ret_len)
{
	if (!json)
		return -EINVAL;
	const char *p = skip_ws(json);
	if (*p++ != '{')
		return -EINVAL;
	size_t klen = strlen(key);
	for (p = skip_ws(p); *p != '}'; p = skip_ws(p + 1)) {
		if (*p != '"')
			return -EINVAL;
		const char *kstart = p + 1;
		p = skip_string(p);
		if (!p)
			return -EINVAL;
		bool match = (size_t)(p - 1 - kstart) == klen && memcmp(kstart, key, klen) == 0;
		p = skip_ws(p);
		if (*p++ != ':')
			return -EINVAL;
		const char *vstart = skip_ws(p);
		p = skip_value(vstart);
		if (!p)
			return -EINVAL;
		if (match) {
			*ret = vstart;
			*ret_len = (size_t)(p - vstart);
			return 0;
		}
		p = skip_ws(p);
		if (*p == '}')
			break;
		if (*p != ',')
			return -EINVAL;
	}
	return -ENOENT;
}
