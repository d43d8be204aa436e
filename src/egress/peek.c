/*
 * peek.c - the host a client wants, from a ClientHello or an HTTP/1.x
 * request head. See peek.h.
 *
 * Internally, -EAGAIN means "valid so far, the rest has not arrived": it
 * becomes PEEK_MORE (or -E2BIG once PEEK_MAX bytes are in) at the top.
 */
#include "egress/peek.h"

#include <errno.h>
#include <string.h>

#define TLS_CHANGE_CIPHER_SPEC 20
#define TLS_HEARTBEAT	       24
#define TLS_HANDSHAKE	       22
#define TLS_CLIENT_HELLO       1
#define TLS_RECORD_MAX	       16384 /* 2^14, the largest plaintext fragment */
#define TLS_EXT_SERVER_NAME    0x0000
#define TLS_EXT_ECH	       0xfe0d
#define TLS_SNI_HOST_NAME      0

#define TRY(expr)                                                                                  \
	do {                                                                                       \
		int try_r_ = (expr);                                                               \
		if (try_r_ < 0)                                                                    \
			return try_r_;                                                             \
	} while (0)

static bool is_alpha(unsigned c)
{
	return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static bool is_digit(unsigned c)
{
	return c >= '0' && c <= '9';
}

static bool is_label_char(unsigned c)
{
	return is_alpha(c) || is_digit(c) || c == '-' || c == '_';
}

bool peek_is_host_name(const char *s)
{
	size_t n = strnlen(s, PEEK_HOST_MAX + 1);
	if (n == 0 || n > PEEK_HOST_MAX)
		return false;
	size_t labels = 0, last = 0;
	for (size_t start = 0; start <= n;) {
		size_t end = start;
		while (end < n && s[end] != '.')
			end++;
		size_t len = end - start;
		if (len == 0 || len > 63 || s[start] == '-' || s[end - 1] == '-')
			return false;
		for (size_t i = start; i < end; i++)
			if (!is_label_char((unsigned char)s[i]))
				return false;
		labels++;
		last = start;
		start = end + 1;
	}
	/* a TLD is never numeric: this refuses every inet_aton() spelling */
	return labels >= 2 && is_alpha((unsigned char)s[last]);
}

/* n bytes of a name, one trailing dot allowed: lower case into host. */
static int host_normalize(const uint8_t *s, size_t n, char host[static PEEK_HOST_MAX + 1])
{
	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0 || n > PEEK_HOST_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		/* checked here: a NUL would end the string early */
		if (!is_label_char(s[i]) && s[i] != '.')
			return -EINVAL;
		host[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] | 0x20 : s[i]);
	}
	host[n] = '\0';
	return peek_is_host_name(host) ? 0 : -EINVAL;
}

/* ---- TLS ---- */

/*
 * A cursor over a handshake message that is perhaps not all here: reading
 * past end (the enclosing vector) is malformed, reading past avail (the
 * bytes received) is -EAGAIN.
 */
struct reader {
	const uint8_t *p;
	size_t pos, end, avail;
};

static int reader_take(struct reader *r, size_t n, const uint8_t **ret)
{
	if (n > r->end - r->pos)
		return -EINVAL;
	if (r->pos + n > r->avail)
		return -EAGAIN;
	*ret = r->p + r->pos;
	r->pos += n;
	return 0;
}

static int reader_uint(struct reader *r, size_t width, size_t *ret)
{
	const uint8_t *b;
	TRY(reader_take(r, width, &b));
	size_t v = 0;
	for (size_t i = 0; i < width; i++)
		v = v << 8 | b[i];
	*ret = v;
	return 0;
}

/* A vector with a width-byte length of min..max: ret covers it, r skips it. */
static int reader_vector(struct reader *r, size_t width, size_t min, size_t max, struct reader *ret)
{
	size_t n;
	TRY(reader_uint(r, width, &n));
	if (n < min || n > max || n > r->end - r->pos)
		return -EINVAL;
	*ret = (struct reader){.p = r->p, .pos = r->pos, .end = r->pos + n, .avail = r->avail};
	r->pos += n;
	return 0;
}

static bool reader_at_end(const struct reader *r)
{
	return r->pos == r->end;
}

/* server_name's data (RFC 6066 3): the one host_name in its list, or none. */
static int sni_parse(struct reader *data, const uint8_t **ret_name, size_t *ret_len)
{
	struct reader list;
	TRY(reader_vector(data, 2, 1, 0xffff, &list));
	if (!reader_at_end(data))
		return -EINVAL;
	const uint8_t *name = NULL;
	size_t len = 0;
	while (!reader_at_end(&list)) {
		size_t type;
		struct reader entry;
		TRY(reader_uint(&list, 1, &type));
		TRY(reader_vector(&list, 2, 1, 0xffff, &entry));
		if (type != TLS_SNI_HOST_NAME)
			continue;
		if (name)
			return -EINVAL; /* one name per type */
		len = entry.end - entry.pos;
		TRY(reader_take(&entry, len, &name));
	}
	*ret_name = name;
	*ret_len = len;
	return 0;
}

/* The handshake message m[0..total), of which avail bytes are here. */
static int client_hello_parse(const uint8_t *m, size_t total, size_t avail,
			      char host[static PEEK_HOST_MAX + 1])
{
	struct reader r = {.p = m, .pos = 4, .end = total, .avail = avail};
	struct reader skip, exts;
	const uint8_t *b;
	TRY(reader_take(&r, 2, &b)); /* legacy_version */
	if (b[0] != 3 || b[1] < 1 || b[1] > 4)
		return -EINVAL;
	TRY(reader_take(&r, 32, &b));		     /* random */
	TRY(reader_vector(&r, 1, 0, 32, &skip));     /* legacy_session_id */
	TRY(reader_vector(&r, 2, 2, 0xfffe, &skip)); /* cipher_suites */
	if ((skip.end - skip.pos) % 2 != 0)
		return -EINVAL;
	TRY(reader_vector(&r, 1, 1, 0xff, &skip)); /* legacy_compression_methods */
	if (reader_at_end(&r))
		return avail < total ? -EAGAIN : -ENOENT; /* no extensions at all */
	TRY(reader_vector(&r, 2, 0, 0xffff, &exts));
	if (!reader_at_end(&r))
		return -EINVAL;
	const uint8_t *name = NULL;
	size_t name_len = 0;
	bool sni = false, ech = false;
	while (!reader_at_end(&exts)) {
		size_t type;
		struct reader data;
		TRY(reader_uint(&exts, 2, &type));
		TRY(reader_vector(&exts, 2, 0, 0xffff, &data));
		if (type == TLS_EXT_SERVER_NAME) {
			if (sni)
				return -EINVAL; /* a second one could name another host */
			sni = true;
			TRY(sni_parse(&data, &name, &name_len));
		} else if (type == TLS_EXT_ECH) {
			ech = true;
		}
	}
	/* the last extension's data may still be on its way */
	if (avail < total)
		return -EAGAIN;
	if (ech)
		return -EPROTONOSUPPORT;
	if (!name)
		return -ENOENT;
	return host_normalize(name, name_len, host);
}

/*
 * Records of type handshake, reassembled into one ClientHello. It must end
 * with a record: nothing else belongs in the client's first flight.
 */
static int tls_parse(const uint8_t *buf, size_t len, struct peek *ret)
{
	uint8_t msg[PEEK_MAX];
	size_t pos = 0, got = 0, total = 0; /* total: 4 + the message's length, once known */
	bool done = false;
	while (pos < len && !done) {
		const uint8_t *h = buf + pos;
		size_t have = len - pos;
		if (h[0] != TLS_HANDSHAKE)
			return -EINVAL; /* not one, or interleaved with another type */
		if (have > 1 && h[1] != 3)
			return -EINVAL;
		if (have > 2 && (h[2] < 1 || h[2] > 4))
			return -EINVAL; /* 0x0301..0x0304 */
		if (have < 5)
			break;
		size_t rlen = (size_t)h[3] << 8 | h[4];
		if (rlen == 0 || rlen > TLS_RECORD_MAX)
			return -EINVAL;
		size_t n = rlen < have - 5 ? rlen : have - 5, before = got;
		memcpy(msg + got, h + 5, n); /* got + n <= len <= PEEK_MAX */
		got += n;
		if (got >= 1 && msg[0] != TLS_CLIENT_HELLO)
			return -EINVAL;
		if (got >= 4 && total == 0)
			total = 4 + ((size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3]);
		if (total != 0 && before + rlen > total)
			return -EINVAL; /* bytes after the ClientHello */
		/* the least the whole message needs: this record, then full ones */
		size_t need = pos + 5 + rlen;
		if (total != 0 && before + rlen < total) {
			size_t rest = total - before - rlen;
			need += rest + 5 * ((rest + TLS_RECORD_MAX - 1) / TLS_RECORD_MAX);
		}
		if (need > PEEK_MAX)
			return -E2BIG;
		if (n < rlen)
			break;
		pos += 5 + rlen;
		done = total != 0 && got == total;
	}
	if (got < 4)
		return -EAGAIN;
	struct peek p = {.kind = PEEK_TLS};
	TRY(client_hello_parse(msg, total, got, p.host));
	p.head_len = pos;
	*ret = p;
	return 0;
}

/* ---- HTTP/1.x ---- */

/* RFC 9110 5.6.2 */
static bool is_tchar(unsigned c)
{
	return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", (int)c));
}

static bool is_ows(unsigned c)
{
	return c == ' ' || c == '\t';
}

static int port_parse(const uint8_t *s, size_t n, uint16_t *ret)
{
	if (n == 0 || n > 5)
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/* host[:port], a name only (no [IPv6], no userinfo); port 0 when absent. */
static int authority_parse(const uint8_t *s, size_t n, bool need_port,
			   char host[static PEEK_HOST_MAX + 1], uint16_t *ret_port)
{
	const uint8_t *colon = memchr(s, ':', n);
	size_t host_len = colon ? (size_t)(colon - s) : n;
	uint16_t port = 0;
	if (colon)
		TRY(port_parse(colon + 1, n - host_len - 1, &port));
	else if (need_port)
		return -EINVAL;
	TRY(host_normalize(s, host_len, host));
	*ret_port = port;
	return 0;
}

enum http_form { FORM_ORIGIN, FORM_ABSOLUTE, FORM_AUTHORITY };

struct http_request {
	enum http_form form;
	char host[PEEK_HOST_MAX + 1]; /* from the target (absolute, authority) */
	uint16_t port;
	unsigned nhost; /* Host headers */
	char host_header[PEEK_HOST_MAX + 1];
	uint16_t host_header_port;
};

static bool bytes_equal_nocase(const uint8_t *s, size_t n, const char *lower)
{
	size_t i = 0;
	for (; i < n && lower[i]; i++)
		if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] | 0x20 : s[i]) != (unsigned char)lower[i])
			return false;
	return i == n && lower[i] == '\0';
}

/* METHOD SP request-target SP HTTP/1.x, without its CRLF */
static int request_line_parse(const uint8_t *s, size_t n, struct http_request *r)
{
	size_t m = 0;
	while (m < n && is_tchar(s[m]))
		m++;
	if (m == 0 || m == n || s[m] != ' ')
		return -EINVAL;
	size_t t = m + 1, t_end = t;
	while (t_end < n && s[t_end] > ' ' && s[t_end] < 0x7f)
		t_end++;
	if (t_end == t || t_end == n || s[t_end] != ' ')
		return -EINVAL;
	const uint8_t *v = s + t_end + 1;
	size_t v_len = n - t_end - 1;
	if (v_len != 8 || memcmp(v, "HTTP/1.", 7) != 0 || (v[7] != '0' && v[7] != '1'))
		return -EINVAL;
	const uint8_t *target = s + t;
	size_t target_len = t_end - t;
	bool connect = m == 7 && memcmp(s, "CONNECT", 7) == 0;
	if (connect) {
		r->form = FORM_AUTHORITY;
		return authority_parse(target, target_len, true, r->host, &r->port);
	}
	if (target[0] == '/') {
		r->form = FORM_ORIGIN;
		return 0;
	}
	if (target_len < 7 || !bytes_equal_nocase(target, 7, "http://"))
		return -EINVAL; /* asterisk-form, https://, relative: no name to take */
	size_t a = 7, a_end = a;
	while (a_end < target_len && target[a_end] != '/' && target[a_end] != '?')
		a_end++;
	r->form = FORM_ABSOLUTE;
	/* '@' (userinfo) and '#' fail as name characters */
	return authority_parse(target + a, a_end - a, false, r->host, &r->port);
}

/* field-name ":" OWS field-value OWS, without its CRLF; only Host is read */
static int header_line_parse(const uint8_t *s, size_t n, struct http_request *r)
{
	size_t name = 0;
	while (name < n && is_tchar(s[name]))
		name++;
	if (name == 0 || name == n || s[name] != ':')
		return -EINVAL;
	if (!bytes_equal_nocase(s, name, "host"))
		return 0;
	if (++r->nhost > 1)
		return -EINVAL;
	size_t v = name + 1, v_end = n;
	while (v < v_end && is_ows(s[v]))
		v++;
	while (v_end > v && is_ows(s[v_end - 1]))
		v_end--;
	return authority_parse(s + v, v_end - v, false, r->host_header, &r->host_header_port);
}

static int http_decide(const struct http_request *r, size_t head_len, struct peek *ret)
{
	struct peek p = {.kind = r->form == FORM_AUTHORITY ? PEEK_CONNECT : PEEK_HTTP,
			 .head_len = head_len};
	if (r->form == FORM_ORIGIN) {
		if (r->nhost == 0)
			return -ENOENT;
		memcpy(p.host, r->host_header, sizeof(p.host));
		p.port = r->host_header_port;
	} else {
		uint16_t port = r->port ? r->port : 80; /* absolute-form is http: */
		if (r->nhost == 1 && (strcmp(r->host, r->host_header) != 0 ||
				      (r->host_header_port && r->host_header_port != port)))
			return -EINVAL; /* the server would act on another name */
		memcpy(p.host, r->host, sizeof(p.host));
		p.port = r->port;
	}
	*ret = p;
	return 0;
}

/* Lines end in CRLF; each is checked once complete, the head at CRLF CRLF. */
static int http_parse(const uint8_t *buf, size_t len, struct peek *ret)
{
	struct http_request r = {0};
	size_t line = 0; /* where the current line begins */
	bool first = true;
	for (size_t i = 0; i < len; i++) {
		unsigned c = buf[i];
		if (i > 0 && buf[i - 1] == '\r' && c != '\n')
			return -EINVAL; /* bare CR */
		if (c == '\n') {
			if (i == 0 || buf[i - 1] != '\r')
				return -EINVAL; /* bare LF */
			const uint8_t *s = buf + line;
			size_t n = i - 1 - line;
			if (first)
				TRY(request_line_parse(s, n, &r));
			else if (n == 0)
				return http_decide(&r, i + 1, ret);
			else
				TRY(header_line_parse(s, n, &r));
			first = false;
			line = i + 1;
			continue;
		}
		if (c == '\r')
			continue;
		if ((c < ' ' && c != '\t') || c == 0x7f)
			return -EINVAL;
		if (!first && i == line && is_ows(c))
			return -EINVAL; /* obs-fold */
		if (first && i - line >= PEEK_LINE_MAX)
			return -EINVAL;
	}
	return -EAGAIN;
}

int peek_parse(const uint8_t *buf, size_t len, struct peek *ret)
{
	if (len > PEEK_MAX)
		len = PEEK_MAX;
	if (len == 0) {
		*ret = (struct peek){.kind = PEEK_MORE};
		return 0;
	}
	int r;
	if (buf[0] >= TLS_CHANGE_CIPHER_SPEC && buf[0] <= TLS_HEARTBEAT)
		r = tls_parse(buf, len, ret); /* a record of another type is refused there */
	else if (buf[0] >= 'A' && buf[0] <= 'Z')
		r = http_parse(buf, len, ret);
	else
		return -EPROTO;
	if (r != -EAGAIN)
		return r;
	if (len >= PEEK_MAX)
		return -E2BIG;
	*ret = (struct peek){.kind = PEEK_MORE};
	return 0;
}
