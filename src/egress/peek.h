/*
 * peek.h - which host a sandboxed client wants, from the first bytes it sends.
 *
 * The transparent egress proxy runs outside the sandbox. It accepts a TCP
 * connection the sandbox opened, buffers what the client sends first, and
 * hands those bytes here until they say which host name the client wants;
 * only then does it decide, connect and splice. Two openings are read:
 *
 *   - a TLS ClientHello: the host_name of its server_name extension (SNI).
 *     The handshake message may be split over several records; it is
 *     reassembled, and every length in it is checked against the one that
 *     encloses it. An Encrypted Client Hello is refused: its outer SNI is a
 *     decoy, and the name the server acts on is not readable here.
 *   - an HTTP/1.x request head: the Host header (origin-form), the URI's
 *     authority (absolute-form http://, where a Host header must agree), or
 *     the CONNECT target (authority-form, port required).
 *
 * The input is hostile. Only host names are admitted (peek_is_host_name()):
 * an IP literal, in any spelling a resolver would take for one, is refused,
 * so the proxy always resolves a name itself and then checks the addresses
 * (addr.h). What follows the ClientHello or the request head is not read:
 * a caller that splices the connection lets every later request on it
 * (HTTP keep-alive) reach the same server, under whatever Host it names.
 *
 * Pure functions on byte buffers: no system call, no allocation (a
 * ClientHello is reassembled in a PEEK_MAX buffer on the stack).
 */
#ifndef AGENTBOX_EGRESS_PEEK_H
#define AGENTBOX_EGRESS_PEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes of a stream the proxy buffers before it decides. */
#define PEEK_MAX 16384
/* The longest host name, without a trailing dot (RFC 1035). */
#define PEEK_HOST_MAX 253
/* The longest HTTP request line, without its CRLF. */
#define PEEK_LINE_MAX 8192

enum peek_kind {
	PEEK_MORE,    /* a valid beginning: call again with more bytes */
	PEEK_TLS,     /* a ClientHello; host from its SNI */
	PEEK_HTTP,    /* an HTTP/1.x request head, not CONNECT */
	PEEK_CONNECT, /* an HTTP/1.x CONNECT host:port */
};

struct peek {
	enum peek_kind kind;
	/* lower case, no trailing dot, peek_is_host_name(); "" for PEEK_MORE */
	char host[PEEK_HOST_MAX + 1];
	/* from Host, the http:// URI or CONNECT; 0 if absent, always for TLS */
	uint16_t port;
	/* the bytes the decision rests on: the HTTP head with its blank line, or
	   the TLS records up to the ClientHello's end; 0 for PEEK_MORE */
	size_t head_len;
};

/*
 * Read the first len bytes of a stream (bytes past PEEK_MAX are not read).
 * Returns 0 with ret->kind PEEK_MORE while those bytes begin a valid
 * opening that is not complete yet (never once len >= PEEK_MAX), or 0 with
 * the kind, host and port once it is. A refusal comes as soon as the bytes
 * so far show it, which may be before the opening is complete:
 *   -EPROTO          neither TLS (first byte a TLS record type, 20..24) nor
 *                    HTTP/1.x (first byte an upper case letter)
 *   -EINVAL          malformed: a length that overruns what encloses it (or
 *                    falls short of it), a record other than handshake, a
 *                    record version outside 0x0301..0x0304, a handshake
 *                    message other than ClientHello, bytes after the
 *                    ClientHello in its record, two server_name extensions
 *                    or two host_names in one; for HTTP a bad request
 *                    line, another version than 1.0 or 1.1, a target that is
 *                    neither origin-, http absolute- nor (CONNECT only)
 *                    authority-form, a CONNECT without a port, bare CR or LF,
 *                    obs-fold, NUL or another control byte, a request line
 *                    longer than PEEK_LINE_MAX, two Host headers, a Host that
 *                    names another host than the target, or another port
 *                    (80 for http:// without one); and, in SNI or HTTP alike,
 *                    a name that is not a host name (IP literals included;
 *                    one trailing dot is dropped first)
 *   -ENOENT          no name: a ClientHello without a host_name in SNI, an
 *                    origin-form request without Host
 *   -EPROTONOSUPPORT a ClientHello with Encrypted Client Hello (0xfe0d)
 *   -E2BIG           the ClientHello or the head does not end within
 *                    PEEK_MAX bytes
 * -E2BIG comes as soon as the lengths read so far say so. -ENOENT and
 * -EPROTONOSUPPORT wait for the whole ClientHello, which must be well-formed
 * first (-EINVAL wins); ECH is refused before a missing or invalid SNI.
 * ret is written only when 0 is returned. It reads at most PEEK_MAX bytes,
 * and uses as much stack.
 */
int peek_parse(const uint8_t *buf, size_t len, struct peek *ret);

/*
 * Is s a host name the proxy admits? Labels of letters, digits, '-' and
 * '_', 1..63 bytes each, not beginning or ending with '-'; at least two
 * labels; at most PEEK_HOST_MAX bytes; no trailing dot; and a last label
 * that begins with a letter, so that no IPv4 literal in any spelling
 * (1.2.3.4, 127.1, 0x7f.0.0.1) passes. Either case.
 */
bool peek_is_host_name(const char *s);

#endif
