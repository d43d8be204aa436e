/*
 * term.c - text made safe for a terminal (term.h).
 *
 * UTF-8 is decoded strictly (RFC 3629, The Unicode Standard's table 3-7):
 * no overlong forms, no surrogates, nothing past U+10FFFF. A byte that
 * does not start a valid sequence is one unit of its own, so a bad
 * sequence costs one \xHH per byte and never swallows what follows.
 */
#include "client/term.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/*
 * The length of the valid UTF-8 character at s[0..len) into *ret_len and
 * its code point into *ret_cp: 1 when it is valid, 0 when s is a valid
 * start cut short by len, -1 when s[0] starts nothing valid.
 */
static int utf8_decode(const unsigned char *s, size_t len, size_t *ret_len, uint32_t *ret_cp)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;
	unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
	if (c < 0x80) {
		*ret_len = 1;
		*ret_cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return -1;
	}
	for (size_t i = 1; i < n; i++) {
		if (i >= len)
			return 0;
		unsigned char b = s[i];
		if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
			return -1;
		cp = (cp << 6) | (b & 0x3f);
	}
	*ret_len = n;
	*ret_cp = cp;
	return 1;
}

static bool is_bidi(uint32_t cp)
{
	return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

size_t term_escape_unit(const char *s, size_t len, unsigned flags, bool more,
			char out[TERM_UNIT_MAX])
{
	const unsigned char *u = (const unsigned char *)s;
	bool json = flags & TERM_JSON;
	size_t n;
	uint32_t cp;
	int r = utf8_decode(u, len, &n, &cp);
	if (r == 0 && more)
		return 0;
	if (r <= 0) {
		if (json)
			snprintf(out, TERM_UNIT_MAX, "\\uFFFD");
		else
			snprintf(out, TERM_UNIT_MAX, "\\x%02x", u[0]);
		return 1;
	}
	if (cp == '\n' && (flags & TERM_KEEP_NEWLINE))
		goto pass;
	if (cp == '\t' && (flags & TERM_KEEP_TAB))
		goto pass;
	if (cp == '\n' || cp == '\t' || cp == '\r') {
		snprintf(out, TERM_UNIT_MAX, "\\%c", cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r');
		return n;
	}
	if (cp < 0x20 || cp == 0x7f) {
		snprintf(out, TERM_UNIT_MAX, json ? "\\u%04X" : "\\x%02x", (unsigned)cp);
		return n;
	}
	if (cp == '\\' && !json) {
		snprintf(out, TERM_UNIT_MAX, "\\\\");
		return n;
	}
	if ((cp >= 0x80 && cp <= 0x9f) || is_bidi(cp)) {
		snprintf(out, TERM_UNIT_MAX, json ? "\\u%04X" : "\\u%04x", (unsigned)cp);
		return n;
	}
pass:
	memcpy(out, s, n);
	out[n] = '\0';
	return n;
}

/* Escape s[0..len) into out; returns the bytes consumed (a cut character at the end is left). */
static size_t escape_some(const char *s, size_t len, unsigned flags, bool more, struct buf *out)
{
	size_t i = 0;
	while (i < len) {
		/* a run that passes as it is goes in one piece */
		size_t start = i;
		while (i < len) {
			unsigned char c = (unsigned char)s[i];
			if (c < 0x20 || c >= 0x7f || c == '\\')
				break;
			i++;
		}
		if (i > start)
			buf_append(out, s + start, i - start);
		if (i == len)
			break;
		char unit[TERM_UNIT_MAX];
		size_t n = term_escape_unit(s + i, len - i, flags, more, unit);
		if (n == 0)
			break;
		buf_puts(out, unit);
		i += n;
	}
	return i;
}

int term_escape(const char *s, size_t len, unsigned flags, struct buf *out)
{
	escape_some(s, len, flags, false, out);
	return out->failed;
}

bool term_is_safe(const char *s, size_t len, unsigned flags)
{
	size_t i = 0;
	while (i < len) {
		char unit[TERM_UNIT_MAX];
		size_t n = term_escape_unit(s + i, len - i, flags, false, unit);
		if (strlen(unit) != n || memcmp(unit, s + i, n) != 0)
			return false;
		i += n;
	}
	return true;
}

int term_stream_feed(struct term_stream *t, const char *s, size_t len, struct buf *out)
{
	/* first the character the last piece cut, completed from this one */
	while (t->held_len > 0 && len > 0) {
		char tmp[8];
		size_t take = len < 4 ? len : 4;
		memcpy(tmp, t->held, t->held_len);
		memcpy(tmp + t->held_len, s, take);
		size_t have = t->held_len + take;
		char unit[TERM_UNIT_MAX];
		size_t n = term_escape_unit(tmp, have, t->flags, true, unit);
		if (n == 0) { /* still cut: only when this piece is shorter than the rest */
			memcpy(t->held, tmp, have);
			t->held_len = have;
			return out->failed;
		}
		buf_puts(out, unit);
		if (n >= t->held_len) {
			s += n - t->held_len;
			len -= n - t->held_len;
			t->held_len = 0;
		} else { /* the held bytes were not one character: go on with the rest */
			memmove(t->held, t->held + n, t->held_len - n);
			t->held_len -= n;
		}
	}
	if (t->held_len > 0)
		return out->failed;
	size_t used = escape_some(s, len, t->flags, true, out);
	t->held_len = len - used; /* at most 3: a cut character */
	memcpy(t->held, s + used, t->held_len);
	return out->failed;
}

int term_stream_finish(struct term_stream *t, struct buf *out)
{
	escape_some(t->held, t->held_len, t->flags, false, out);
	t->held_len = 0;
	return out->failed;
}

void term_line_init(struct term_line *l, char *buf, size_t size)
{
	*l = (struct term_line){.buf = buf, .size = size};
	if (size)
		buf[0] = '\0';
}

void term_line_add(struct term_line *l, const char *s, size_t n)
{
	size_t i = 0;
	while (!l->cut && l->size > 0 && i < n) {
		char unit[TERM_UNIT_MAX];
		size_t used = term_escape_unit(s + i, n - i, 0, false, unit);
		size_t ulen = strlen(unit);
		if (l->len + ulen > l->size - 1) {
			/* it does not fit: cut after the last unit that leaves room for "..." */
			l->cut = true;
			l->len = l->fit;
			snprintf(l->buf + l->len, l->size - l->len, "...");
			l->len += strlen(l->buf + l->len);
			return;
		}
		memcpy(l->buf + l->len, unit, ulen);
		l->len += ulen;
		l->buf[l->len] = '\0';
		if (l->len + 3 <= l->size - 1)
			l->fit = l->len;
		i += used;
	}
}

void term_line_adds(struct term_line *l, const char *s)
{
	term_line_add(l, s, strlen(s));
}
