/*
 * json-util.c - the canonical JSON writer, a depth pre-check, and a raw
 * member scanner for the JSON we stored ourselves. See json-util.h.
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

void jbuf_release(struct jbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

/* Room for `extra` more bytes and a NUL; false (and failed set) if none. */
static bool jbuf_reserve(struct jbuf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (extra > SIZE_MAX / 2 - b->len || (b->max && b->len + extra > b->max)) {
		b->failed = -E2BIG;
		return false;
	}
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = -ENOMEM;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void jbuf_put(struct jbuf *b, const char *s, size_t n)
{
	if (!jbuf_reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void jbuf_puts(struct jbuf *b, const char *s)
{
	jbuf_put(b, s, strlen(s));
}

void jbuf_printf(struct jbuf *b, const char *fmt, ...)
{
	char small[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		if (!b->failed)
			b->failed = -EINVAL;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		jbuf_put(b, small, (size_t)n);
		return;
	}
	if (!jbuf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

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

void jbuf_str(struct jbuf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0; /* start of the bytes not yet copied */
	jbuf_put(b, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = p[i];
		size_t k = c >= 0x20 && c != '"' && c != '\\' ? utf8_seq_len(p + i, n - i) : 0;
		if (k > 0) {
			i += k;
			continue;
		}
		jbuf_put(b, s + run, i - run);
		switch (c) {
		case '"':
			jbuf_put(b, "\\\"", 2);
			break;
		case '\\':
			jbuf_put(b, "\\\\", 2);
			break;
		case '\n':
			jbuf_put(b, "\\n", 2);
			break;
		case '\r':
			jbuf_put(b, "\\r", 2);
			break;
		case '\t':
			jbuf_put(b, "\\t", 2);
			break;
		default:
			if (c < 0x20)
				jbuf_printf(b, "\\u%04x", c);
			else
				jbuf_put(b, "\xef\xbf\xbd", 3); /* U+FFFD for a bad byte */
		}
		run = ++i;
	}
	jbuf_put(b, s + run, n - run);
	jbuf_put(b, "\"", 1);
}

void jbuf_str_or_null(struct jbuf *b, const char *s)
{
	if (s)
		jbuf_strz(b, s);
	else
		jbuf_puts(b, "null");
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void write_real(struct jbuf *b, double d)
{
	char tmp[40];
	if (d != d || d - d != 0) { /* NaN or infinite: jansson never makes one */
		jbuf_puts(b, "null");
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
	jbuf_puts(b, tmp);
	if (!strpbrk(tmp, ".eE"))
		jbuf_put(b, ".0", 2);
}

static void write_value(struct jbuf *b, const json_t *v, int depth)
{
	if (depth > JSON_WRITE_DEPTH_MAX) {
		if (!b->failed)
			b->failed = -E2BIG;
		return;
	}
	json_t *m = (json_t *)v; /* jansson's iteration macros take non-const */
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		size_t n = json_object_size(v), i = 0;
		const char **keys = n ? calloc(n, sizeof(*keys)) : NULL;
		if (n && !keys) {
			if (!b->failed)
				b->failed = -ENOMEM;
			return;
		}
		const char *key;
		json_t *val;
		json_object_foreach(m, key, val) keys[i++] = key;
		if (n)
			qsort(keys, n, sizeof(*keys), key_cmp);
		jbuf_put(b, "{", 1);
		for (i = 0; i < n && !b->failed; i++) {
			if (i)
				jbuf_put(b, ",", 1);
			jbuf_strz(b, keys[i]);
			jbuf_put(b, ":", 1);
			write_value(b, json_object_get(v, keys[i]), depth + 1);
		}
		jbuf_put(b, "}", 1);
		free(keys);
		break;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *val;
		jbuf_put(b, "[", 1);
		json_array_foreach(m, i, val)
		{
			if (b->failed)
				break;
			if (i)
				jbuf_put(b, ",", 1);
			write_value(b, val, depth + 1);
		}
		jbuf_put(b, "]", 1);
		break;
	}
	case JSON_STRING:
		jbuf_str(b, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		jbuf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		write_real(b, json_real_value(v));
		break;
	case JSON_TRUE:
		jbuf_puts(b, "true");
		break;
	case JSON_FALSE:
		jbuf_puts(b, "false");
		break;
	case JSON_NULL:
		jbuf_puts(b, "null");
		break;
	}
}

void jbuf_json(struct jbuf *b, const json_t *v)
{
	if (v)
		write_value(b, v, 0);
	else
		jbuf_puts(b, "null");
}

void jbuf_truncate(struct jbuf *b, size_t mark)
{
	if (b->failed == -E2BIG)
		b->failed = 0;
	if (mark < b->len) {
		b->len = mark;
		b->p[mark] = '\0';
	}
}

int jbuf_finish(struct jbuf *b, char **ret, size_t *ret_len)
{
	if (!b->failed)
		jbuf_reserve(b, 0); /* an empty buffer still gets its NUL */
	if (b->failed) {
		int r = b->failed;
		jbuf_release(b);
		return r;
	}
	*ret = b->p;
	if (ret_len)
		*ret_len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return 0;
}

bool json_depth_exceeds(const char *s, size_t n, int max)
{
	int depth = 0;
	bool in_string = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max)
				return true;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return false;
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
