/*
 * inject.c - a secret into a request head, and out of the response. See
 * inject.h.
 *
 * The head is read one byte at a time by a small state machine, so a
 * refusal comes as soon as the byte that shows it has arrived. The rewrite
 * runs that machine again over the whole head first; its own line walk
 * can then trust the shape (every line ends in CRLF, a field has a colon).
 */
#include "egress/inject.h"

#include <errno.h>
#include <string.h>

#define PREFIX_LEN  (sizeof(INJECT_PLACEHOLDER_PREFIX) - 1)
#define PORT_MAX    5 /* digits */
#define VERSION_LEN 8 /* "HTTP/1.x" */

static bool is_tchar(unsigned c)
{
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
		return true;
	if (c >= '0' && c <= '9')
		return true;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", (int)c) != NULL;
}

static bool is_value_byte(unsigned c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool is_hex_lower(unsigned c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static unsigned lower(unsigned c)
{
	return c >= 'A' && c <= 'Z' ? c | 0x20 : c;
}

/* Is c the byte at `at` of "HTTP/1.0" or "HTTP/1.1" and the CR after it? */
static bool version_byte_is(size_t at, unsigned c)
{
	static const char prefix[] = "HTTP/1.";
	if (at < sizeof(prefix) - 1)
		return c == (unsigned char)prefix[at];
	if (at == sizeof(prefix) - 1)
		return c == '0' || c == '1';
	return c == '\r';
}

bool inject_placeholder_is_valid(const char *s)
{
	if (strnlen(s, INJECT_PLACEHOLDER_LEN + 1) != INJECT_PLACEHOLDER_LEN ||
	    memcmp(s, INJECT_PLACEHOLDER_PREFIX, PREFIX_LEN) != 0)
		return false;
	for (size_t i = PREFIX_LEN; i < INJECT_PLACEHOLDER_LEN; i++)
		if (!is_hex_lower((unsigned char)s[i]))
			return false;
	return true;
}

bool inject_value_is_valid(const char *s)
{
	size_t n = strnlen(s, INJECT_VALUE_MAX + 1);
	if (n == 0 || n > INJECT_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned c = (unsigned char)s[i];
		if (c != '\t' && (c < 0x20 || c > 0x7e))
			return false;
	}
	return true;
}

static int pairs_check(const struct inject_pair *pairs, size_t npairs, bool placeholders)
{
	if (npairs > INJECT_PAIRS_MAX || (npairs && !pairs))
		return -EINVAL;
	for (size_t i = 0; i < npairs; i++)
		if (!pairs[i].value || !inject_value_is_valid(pairs[i].value) ||
		    (placeholders &&
		     (!pairs[i].placeholder || !inject_placeholder_is_valid(pairs[i].placeholder))))
			return -EINVAL;
	return 0;
}

/* ---- the request head ------------------------------------------------------ */

enum head_state {
	S_METHOD,  /* the method token */
	S_TARGET,  /* the request target */
	S_VERSION, /* "HTTP/1.x" */
	S_RL_LF,   /* the request line's LF */
	S_LINE,	   /* the start of a header line, or the blank line */
	S_NAME,	   /* a field name */
	S_VALUE,   /* a field value */
	S_LF,	   /* a header line's LF */
	S_END_LF,  /* the blank line's LF */
};

int inject_head_len(const uint8_t *buf, size_t len)
{
	enum head_state st = S_METHOD;
	size_t run = 0, fields = 0; /* run: bytes of the current token */
	size_t n = len < INJECT_HEAD_MAX ? len : INJECT_HEAD_MAX;
	for (size_t i = 0; i < n; i++) {
		unsigned c = buf[i];
		switch (st) {
		case S_METHOD:
		case S_TARGET:
			if (c == ' ' && run > 0) {
				st = st == S_METHOD ? S_TARGET : S_VERSION;
				run = 0;
			} else if (st == S_METHOD ? is_tchar(c) : c > 0x20 && c < 0x7f) {
				run++;
			} else {
				return -EINVAL;
			}
			break;
		case S_VERSION:
			if (!version_byte_is(run, c))
				return -EINVAL;
			if (++run == VERSION_LEN + 1) /* "HTTP/1.x" and its CR */
				st = S_RL_LF;
			break;
		case S_RL_LF:
		case S_LF:
			if (c != '\n')
				return -EINVAL;
			st = S_LINE;
			break;
		case S_LINE:
			if (c == '\r') {
				st = S_END_LF;
			} else if (is_tchar(c)) {
				if (++fields > INJECT_FIELDS_MAX)
					return -E2BIG;
				st = S_NAME;
			} else {
				return -EINVAL; /* obs-fold (SP, HTAB) among them */
			}
			break;
		case S_NAME:
			if (c == ':')
				st = S_VALUE;
			else if (!is_tchar(c))
				return -EINVAL;
			break;
		case S_VALUE:
			if (c == '\r')
				st = S_LF;
			else if (!is_value_byte(c))
				return -EINVAL;
			break;
		case S_END_LF:
			if (c != '\n')
				return -EINVAL;
			return (int)(i + 1);
		}
	}
	return len >= INJECT_HEAD_MAX ? -E2BIG : 0;
}

/* ---- the rewrite ------------------------------------------------------------- */

static bool name_is(const uint8_t *p, size_t n, const char *name)
{
	if (n != strlen(name))
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(p[i]) != (unsigned char)name[i])
			return false;
	return true;
}

static bool is_dropped(const uint8_t *p, size_t n)
{
	static const char *const dropped[] = {"connection", "proxy-connection", "keep-alive",
					      "upgrade",    "accept-encoding",	"te"};
	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
		if (name_is(p, n, dropped[i]))
			return true;
	return false;
}

/* Is p[0..n) host, in any case, one trailing dot allowed, then ":digits" or nothing? */
static bool authority_is(const uint8_t *p, size_t n, const char *host)
{
	size_t h = strlen(host), i = 0;
	if (n < h)
		return false;
	for (; i < h; i++)
		if (lower(p[i]) != (unsigned char)host[i])
			return false;
	if (i < n && p[i] == '.')
		i++;
	if (i == n)
		return true;
	if (p[i++] != ':' || n - i < 1 || n - i > PORT_MAX)
		return false;
	for (; i < n; i++)
		if (p[i] < '0' || p[i] > '9')
			return false;
	return true;
}

/* The target (origin-, absolute- or asterisk-form): 0, -EINVAL or -EACCES. */
static int target_check(const uint8_t *t, size_t n, const char *host)
{
	if (n >= 1 && t[0] == '/')
		return 0;
	if (n == 1 && t[0] == '*')
		return 0;
	size_t skip = 0;
	if (n >= 7 && name_is(t, 7, "http://"))
		skip = 7;
	else if (n >= 8 && name_is(t, 8, "https://"))
		skip = 8;
	else
		return -EINVAL;
	size_t end = skip;
	while (end < n && t[end] != '/' && t[end] != '?' && t[end] != '#')
		end++;
	if (memchr(t + skip, '@', end - skip))
		return -EACCES; /* user info: what is the host, "a@b" or "b"? not ours to guess */
	return authority_is(t + skip, end - skip, host) ? 0 : -EACCES;
}

/* Append a value with each placeholder of pairs replaced. */
static int value_append(struct buf *out, size_t start, const uint8_t *v, size_t n,
			const struct inject_pair *pairs, size_t npairs)
{
	size_t from = 0, i = 0;
	while (i + INJECT_PLACEHOLDER_LEN <= n) {
		const uint8_t *hit = memchr(v + i, 'a', n - i - INJECT_PLACEHOLDER_LEN + 1);
		if (!hit)
			break;
		i = (size_t)(hit - v);
		const struct inject_pair *p = NULL;
		for (size_t k = 0; k < npairs && !p; k++)
			if (memcmp(v + i, pairs[k].placeholder, INJECT_PLACEHOLDER_LEN) == 0)
				p = &pairs[k];
		if (!p) {
			i++;
			continue;
		}
		buf_append(out, v + from, i - from);
		buf_puts(out, p->value);
		if (out->len - start > INJECT_REWRITE_MAX)
			return -E2BIG;
		i += INJECT_PLACEHOLDER_LEN;
		from = i;
	}
	return buf_append(out, v + from, n - from);
}

static int rewrite(const uint8_t *head, size_t len, const char *host,
		   const struct inject_pair *pairs, size_t npairs, struct buf *out, size_t start)
{
	static const char close_line[] = "Accept-Encoding: identity\r\nConnection: close\r\n\r\n";
	const uint8_t *eol = memchr(head, '\r', len); /* checked: the request line ends */
	size_t line = (size_t)(eol - head);
	const uint8_t *sp1 = memchr(head, ' ', line);
	const uint8_t *sp2 = memchr(sp1 + 1, ' ', line - (size_t)(sp1 + 1 - head));
	/* TRACE sends the request back: the values with it, where no scrubber may see them
	 * (a proxy on the way may answer it) */
	if ((size_t)(sp1 - head) == 5 && memcmp(head, "TRACE", 5) == 0)
		return -EPERM;
	int r = target_check(sp1 + 1, (size_t)(sp2 - sp1 - 1), host);
	if (r < 0)
		return r;
	buf_append(out, head, line + 2);
	size_t hosts = 0, kept = 0;
	for (size_t at = line + 2; head[at] != '\r';) {
		const uint8_t *p = head + at;
		size_t n = (size_t)((const uint8_t *)memchr(p, '\r', len - at) - p);
		size_t colon = (size_t)((const uint8_t *)memchr(p, ':', n) - p);
		at += n + 2;
		if (is_dropped(p, colon))
			continue;
		if (++kept >= INJECT_FIELDS_MAX - 1) /* no room left for the two of ours */
			return -E2BIG;
		if (name_is(p, colon, "host")) {
			size_t b = colon + 1, e = n;
			while (b < e && (p[b] == ' ' || p[b] == '\t'))
				b++;
			while (e > b && (p[e - 1] == ' ' || p[e - 1] == '\t'))
				e--;
			if (++hosts > 1)
				return -EINVAL;
			if (!authority_is(p + b, e - b, host))
				return -EACCES;
		}
		buf_append(out, p, colon + 1);
		if ((r = value_append(out, start, p + colon + 1, n - colon - 1, pairs, npairs)) < 0)
			return r;
		buf_append(out, "\r\n", 2);
	}
	if (hosts == 0)
		return -EACCES;
	if ((r = buf_append(out, close_line, sizeof(close_line) - 1)) < 0)
		return r;
	return out->len - start > INJECT_REWRITE_MAX ? -E2BIG : 0;
}

int inject_rewrite(const uint8_t *head, size_t len, const char *host,
		   const struct inject_pair *pairs, size_t npairs, struct buf *out)
{
	if (!head || !host || !*host || pairs_check(pairs, npairs, true) < 0 || len == 0 ||
	    inject_head_len(head, len) != (int)len)
		return -EINVAL;
	size_t start = out->len;
	int r = rewrite(head, len, host, pairs, npairs, out, start);
	if (r == 0 && out->failed)
		r = out->failed;
	if (r < 0)
		buf_truncate(out, start);
	return r;
}

/* ---- the scrubber ------------------------------------------------------------ */

int inject_scrub_init(struct inject_scrub *s, const struct inject_pair *pairs, size_t npairs)
{
	if (pairs_check(pairs, npairs, false) < 0)
		return -EINVAL;
	size_t longest = 1;
	for (size_t i = 0; i < npairs; i++) {
		s->vlen[i] = strlen(pairs[i].value);
		if (s->vlen[i] > longest)
			longest = s->vlen[i];
	}
	s->pairs = pairs;
	s->npairs = npairs;
	s->keep = longest - 1;
	s->ncarry = s->masked = 0;
	return 0;
}

/*
 * Where the bytes to hold back begin in the window w[0..n): after its
 * last newline, and never more than keep bytes back. A value holds no
 * newline, so an occurrence not yet complete starts after the last one,
 * and within the last keep bytes. What is held back does not depend on
 * the values (no timing tells a byte of one); a stream whose chunks end
 * in a newline (SSE, JSON lines) is held back not at all.
 */
static size_t hold_from(const struct inject_scrub *s, const uint8_t *w, size_t n)
{
	size_t from = n > s->keep ? n - s->keep : 0;
	for (size_t p = n; p > from; p--)
		if (w[p - 1] == '\n')
			return p;
	return from;
}

/*
 * The window w[0..n) is the carry and the new bytes, appended to out.
 * Decide its first `upto` bytes: a value may start at any of them (all
 * values that fit are tried; none that does not fit can start there, by
 * hold_from()), and a byte is masked when
 * an occurrence that starts at or before it covers it. Bytes are masked
 * only once every occurrence that could read them has been tried, so
 * occurrences see the stream as it came. Returns how far the masking
 * reaches, counted from w.
 */
static size_t scrub_window(const struct inject_scrub *s, uint8_t *w, size_t n, size_t upto)
{
	size_t mask_until = s->masked;
	for (size_t i = 0; i < upto; i++) {
		for (size_t k = 0; k < s->npairs; k++) {
			const char *v = s->pairs[k].value;
			size_t vn = s->vlen[k];
			if ((unsigned char)v[0] != w[i])
				continue;
			if (vn <= n - i && memcmp(w + i, v, vn) == 0 && i + vn > mask_until)
				mask_until = i + vn;
		}
		if (i < mask_until)
			w[i] = '*';
	}
	return mask_until;
}

static int scrub(struct inject_scrub *s, const uint8_t *data, size_t len, struct buf *out,
		 bool final)
{
	size_t start = out->len;
	if (buf_reserve(out, s->ncarry + len) < 0)
		return out->failed;
	buf_append(out, s->carry, s->ncarry);
	buf_append(out, data, len);
	uint8_t *w = (uint8_t *)out->data + start;
	size_t n = s->ncarry + len;
	size_t upto = final ? n : hold_from(s, w, n);
	size_t mask_until = scrub_window(s, w, n, upto);
	/* what is held back goes back to the carry, as it came (never masked yet) */
	s->ncarry = n - upto;
	memmove(s->carry, w + upto, s->ncarry);
	s->masked = mask_until > upto ? mask_until - upto : 0;
	buf_truncate(out, start + upto);
	return 0;
}

int inject_scrub_feed(struct inject_scrub *s, const uint8_t *data, size_t len, struct buf *out)
{
	return scrub(s, data, len, out, false);
}

int inject_scrub_flush(struct inject_scrub *s, struct buf *out)
{
	int r = scrub(s, NULL, 0, out, true);
	if (r == 0)
		s->ncarry = s->masked = 0;
	return r;
}
