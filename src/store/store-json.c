/*
 * store-json.c - the little JSON the store needs: checking that a progress
 * event is an object, merging its top-level members into the task's
 * progress, and writing the data of status events.
 *
 * Reading is strict RFC 8259 (UTF-8 checked, no trailing garbage), so
 * nothing malformed reaches the database. Values are copied as the text
 * they came in, never re-rendered: a number keeps every digit it had.
 */
#include "store/store-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A top-level member: spans of its key (inside the quotes) and its value. */
struct member {
	const char *key;
	size_t key_len;
	const char *value;
	size_t value_len;
};

struct members {
	struct member *v;
	size_t n, cap;
};

static bool scan_value(const char **pp, int depth);

static void skip_ws(const char **pp)
{
	while (**pp == ' ' || **pp == '\t' || **pp == '\n' || **pp == '\r')
		(*pp)++;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Length of the well-formed UTF-8 sequence at p, or 0. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		lo = p[0] == 0xe0 ? 0xa0 : lo; /* no overlong forms */
		hi = p[0] == 0xed ? 0x9f : hi; /* no surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		lo = p[0] == 0xf0 ? 0x90 : lo;
		hi = p[0] == 0xf4 ? 0x8f : hi; /* nothing past U+10FFFF */
	} else {
		return 0;
	}
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* *pp at the opening quote; moves past the closing one. */
static bool scan_string(const char **pp)
{
	const char *p = *pp + 1;
	for (;;) {
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			break;
		if (c < 0x20) /* a control character, or the end of the text */
			return false;
		if (c == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!is_hex(p[i]))
						return false;
				p += 5;
			} else if (*p && strchr("\"\\/bfnrt", *p)) {
				p++;
			} else {
				return false;
			}
		} else if (c >= 0x80) {
			size_t n = utf8_len((const unsigned char *)p);
			if (n == 0)
				return false;
			p += n;
		} else {
			p++;
		}
	}
	*pp = p + 1;
	return true;
}

static bool scan_digits(const char **pp)
{
	if (!is_digit(**pp))
		return false;
	while (is_digit(**pp))
		(*pp)++;
	return true;
}

static bool scan_number(const char **pp)
{
	if (**pp == '-')
		(*pp)++;
	if (**pp == '0')
		(*pp)++;
	else if (!scan_digits(pp))
		return false;
	if (**pp == '.') {
		(*pp)++;
		if (!scan_digits(pp))
			return false;
	}
	if (**pp == 'e' || **pp == 'E') {
		(*pp)++;
		if (**pp == '+' || **pp == '-')
			(*pp)++;
		if (!scan_digits(pp))
			return false;
	}
	return true;
}

static bool scan_word(const char **pp, const char *word)
{
	size_t n = strlen(word);
	if (strncmp(*pp, word, n) != 0)
		return false;
	*pp += n;
	return true;
}

static int members_add(struct members *m, const struct member *x)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;
		struct member *v = reallocarray(m->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = *x;
	return 0;
}

/*
 * *pp at '{' or '['; moves past the matching close. With ret (objects at
 * the top level only), each member's spans are added to it.
 */
static int scan_container(const char **pp, int depth, struct members *ret)
{
	char close = **pp == '{' ? '}' : ']';
	if (depth > STORE_JSON_DEPTH_MAX)
		return -EINVAL;
	(*pp)++;
	skip_ws(pp);
	if (**pp == close) {
		(*pp)++;
		return 0;
	}
	for (;;) {
		struct member m = {0};
		if (close == '}') {
			if (**pp != '"')
				return -EINVAL;
			m.key = *pp + 1;
			if (!scan_string(pp))
				return -EINVAL;
			m.key_len = (size_t)(*pp - m.key - 1);
			skip_ws(pp);
			if (**pp != ':')
				return -EINVAL;
			(*pp)++;
			skip_ws(pp);
		}
		m.value = *pp;
		if (!scan_value(pp, depth + 1))
			return -EINVAL;
		m.value_len = (size_t)(*pp - m.value);
		if (ret && members_add(ret, &m) < 0)
			return -ENOMEM;
		skip_ws(pp);
		if (**pp == close) {
			(*pp)++;
			return 0;
		}
		if (**pp != ',')
			return -EINVAL;
		(*pp)++;
		skip_ws(pp);
	}
}

static bool scan_value(const char **pp, int depth)
{
	switch (**pp) {
	case '{':
	case '[':
		return scan_container(pp, depth, NULL) == 0;
	case '"':
		return scan_string(pp);
	case 't':
		return scan_word(pp, "true");
	case 'f':
		return scan_word(pp, "false");
	case 'n':
		return scan_word(pp, "null");
	default:
		return scan_number(pp);
	}
}

/* The members of the object s. -EINVAL if s is anything else. */
static int parse_object(const char *s, struct members *ret)
{
	if (!s)
		return -EINVAL;
	skip_ws(&s);
	if (*s != '{')
		return -EINVAL;
	int r = scan_container(&s, 1, ret);
	if (r < 0)
		return r;
	skip_ws(&s);
	return *s == '\0' ? 0 : -EINVAL;
}

bool store_json_is_object(const char *s)
{
	return parse_object(s, NULL) == 0;
}

static uint32_t hex4(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned char c = p[i];
		v = v << 4 | (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

/* The next character of a checked string body, decoded to a code point. */
static uint32_t next_char(const char **pp)
{
	const unsigned char *p = (const unsigned char *)*pp;
	uint32_t c;
	if (p[0] == '\\' && p[1] == 'u') {
		c = hex4(p + 2);
		p += 6;
		if (c >= 0xd800 && c <= 0xdbff && p[0] == '\\' && p[1] == 'u') {
			uint32_t lo = hex4(p + 2);
			if (lo >= 0xdc00 && lo <= 0xdfff) {
				c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			}
		}
	} else if (p[0] == '\\') {
		static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
		c = (unsigned char)to[strchr(from, p[1]) - from];
		p += 2;
	} else if (p[0] < 0x80) {
		c = *p++;
	} else {
		size_t n = utf8_len(p);
		c = p[0] & (0x3f >> (n - 1));
		for (size_t i = 1; i < n; i++)
			c = c << 6 | (p[i] & 0x3f);
		p += n;
	}
	*pp = (const char *)p;
	return c;
}

/* Do two checked key bodies name the same key, however they are escaped? */
static bool key_equal(const struct member *a, const struct member *b)
{
	if (a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0)
		return true;
	if (!memchr(a->key, '\\', a->key_len) && !memchr(b->key, '\\', b->key_len))
		return false;
	const char *p = a->key, *pend = a->key + a->key_len;
	const char *q = b->key, *qend = b->key + b->key_len;
	while (p < pend && q < qend)
		if (next_char(&p) != next_char(&q))
			return false;
	return p == pend && q == qend;
}

int store_json_merge(const char *base, const char *patch, char **ret)
{
	struct members out = {0}, add = {0};
	char *text = NULL;
	int r = parse_object(base, &out);
	if (r == 0)
		r = parse_object(patch, &add);
	for (size_t i = 0; r == 0 && i < add.n; i++) {
		size_t j = 0;
		while (j < out.n && !key_equal(&out.v[j], &add.v[i]))
			j++;
		if (j < out.n) { /* the key keeps its place and its spelling */
			out.v[j].value = add.v[i].value;
			out.v[j].value_len = add.v[i].value_len;
		} else {
			r = members_add(&out, &add.v[i]);
		}
	}
	size_t size = 3; /* "{}" and the NUL */
	for (size_t i = 0; r == 0 && i < out.n; i++)
		size += out.v[i].key_len + out.v[i].value_len + 4; /* "": and , */
	if (r == 0 && size > STORE_PROGRESS_MAX)
		r = -E2BIG;
	if (r == 0 && !(text = malloc(size)))
		r = -ENOMEM;
	if (r == 0) {
		char *p = text;
		*p++ = '{';
		for (size_t i = 0; i < out.n; i++) {
			if (i > 0)
				*p++ = ',';
			*p++ = '"';
			memcpy(p, out.v[i].key, out.v[i].key_len);
			p += out.v[i].key_len;
			*p++ = '"';
			*p++ = ':';
			memcpy(p, out.v[i].value, out.v[i].value_len);
			p += out.v[i].value_len;
		}
		*p++ = '}';
		*p = '\0';
		*ret = text;
	}
	free(out.v);
	free(add.v);
	return r;
}

/* Append s to buf as the body of a JSON string; bad UTF-8 becomes U+FFFD. */
static size_t escape_into(char *buf, const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		const char *esc = NULL;
		char u[8];
		switch (*p) {
		case '"':
			esc = "\\\"";
			break;
		case '\\':
			esc = "\\\\";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\r':
			esc = "\\r";
			break;
		case '\t':
			esc = "\\t";
			break;
		default:
			if (*p < 0x20) {
				snprintf(u, sizeof(u), "\\u%04x", *p);
				esc = u;
			}
		}
		if (esc) {
			size_t len = strlen(esc);
			if (buf)
				memcpy(buf + n, esc, len);
			n += len;
			p++;
		} else if (*p < 0x80) {
			if (buf)
				buf[n] = (char)*p;
			n++;
			p++;
		} else {
			size_t len = utf8_len(p);
			const char *copy = len ? (const char *)p : "\xef\xbf\xbd";
			size_t clen = len ? len : 3;
			if (buf)
				memcpy(buf + n, copy, clen);
			n += clen;
			p += len ? len : 1;
		}
	}
	return n;
}

int store_json_status_event(enum task_status status, uint32_t attempt, int end, int exit_code,
			    const char *error, char **ret)
{
	const char *name = task_status_name(status);
	const char *end_name = end >= 0 ? task_status_name((enum task_status)end) : NULL;
	if (!name || (end >= 0 && !end_name))
		return -EINVAL;
	char code[16] = "null", end_field[48] = "";
	if (exit_code >= 0)
		snprintf(code, sizeof(code), "%d", exit_code);
	if (end_name)
		snprintf(end_field, sizeof(end_field), "\"end\":\"%s\",", end_name);
	char head[160];
	int n = snprintf(head, sizeof(head),
			 "{\"status\":\"%s\",\"attempt\":%u,%s\"exit_code\":%s,\"error\":", name,
			 attempt, end_field, code);
	size_t elen = error ? escape_into(NULL, error) + 2 : strlen("null");
	char *text = malloc((size_t)n + elen + 2);
	if (!text)
		return -ENOMEM;
	memcpy(text, head, (size_t)n);
	char *p = text + n;
	if (error) {
		*p++ = '"';
		p += escape_into(p, error);
		*p++ = '"';
	} else {
		memcpy(p, "null", 4);
		p += 4;
	}
	*p++ = '}';
	*p = '\0';
	*ret = text;
	return 0;
}
