/*
 * inject.h - a secret put into a sandbox's HTTP request on its way out,
 * and kept out of the response on its way back.
 *
 * A task may carry secrets bound to hosts. Inside the sandbox the secret
 * is a placeholder (INJECT_PLACEHOLDER_PREFIX and 32 lower-case hex
 * digits); the egress proxy, outside, reads the request head a client
 * sends to one of the secret's hosts (TLS terminated by
 * network/intercept.h) and puts the value where the placeholder was. The
 * response comes back through a scrubber that masks the value, so a
 * server that echoes the header cannot hand it to the sandbox.
 *
 * One request per connection. The rewritten head says "Connection: close",
 * and everything the client sends after its first head is passed through
 * as it is: a second request on the same connection reaches the server
 * with its placeholders, never with the value (it fails safe).
 *
 * What is rewritten, exactly: header field values, every occurrence of a
 * placeholder of the pairs given (first pair wins when two share one).
 * Never the request line, a field name or the body. Connection,
 * Proxy-Connection, Keep-Alive and Upgrade fields are dropped (no upgrade
 * to another protocol can follow, so the head rewritten is the only one
 * that matters), and so are Accept-Encoding and TE: the response must come
 * uncompressed, or the scrubber could not see a value the server echoes.
 * "Accept-Encoding: identity" and "Connection: close" end the head. A
 * TRACE request (the server echoes it all back) is refused.
 *
 * The input is hostile. A head is strict HTTP/1.x (RFC 9112): lines end
 * in CRLF, and bare LF is refused as well as bare CR. A peer that takes
 * bare LF for a line end would read a head differently from the way it is
 * read here, and a field this code never saw could carry a placeholder
 * past it, or a value into a place it never checked. Common clients (curl,
 * browsers, Python, Go, Node) send CRLF. Obs-fold, NUL and every control
 * byte other than HTAB in a value are refused too.
 *
 * A secret's value is 1..INJECT_VALUE_MAX bytes of visible ASCII, space or
 * tab (no CR, LF or NUL: it could end a header line). The API checks that;
 * this code checks it again and refuses another value with -EINVAL.
 *
 * Pure functions on byte buffers: no system call, and no allocation except
 * through struct buf (base/buf.h). Nothing here keeps a copy of a value:
 * the caller owns the pairs and keeps them alive for a scrubber's life.
 * Errors never quote a value.
 */
#ifndef AGENTBOX_EGRESS_INJECT_H
#define AGENTBOX_EGRESS_INJECT_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest request head taken, its blank line included. */
#define INJECT_HEAD_MAX (64 << 10)
/* The most header lines in one head. */
#define INJECT_FIELDS_MAX 256
/* The longest head a rewrite may produce (values are longer than placeholders). */
#define INJECT_REWRITE_MAX (256 << 10)
/* The most pairs one rewrite or one scrubber takes. */
#define INJECT_PAIRS_MAX 32
/* The longest secret value. */
#define INJECT_VALUE_MAX 4096
/* A placeholder: this prefix, then 32 lower-case hex digits. */
#define INJECT_PLACEHOLDER_PREFIX "agentbox-secret-"
#define INJECT_PLACEHOLDER_LEN	  (sizeof(INJECT_PLACEHOLDER_PREFIX) - 1 + 32)

/* One secret, as a caller hands it over for one host; both C strings, borrowed. */
struct inject_pair {
	const char *placeholder; /* inject_placeholder_is_valid() */
	const char *value;	 /* inject_value_is_valid() */
};

/* Is s INJECT_PLACEHOLDER_PREFIX and 32 lower-case hex digits, and nothing more? */
bool inject_placeholder_is_valid(const char *s);

/* Is s 1..INJECT_VALUE_MAX bytes of 0x20..0x7e or HTAB? */
bool inject_value_is_valid(const char *s);

/* ---- the request head ---------------------------------------------------- */

/*
 * Does buf[0..len) begin with a complete HTTP/1.x request head: a request
 * line (method token, SP, a target of visible ASCII, SP, "HTTP/1.0" or
 * "HTTP/1.1", CRLF), header lines (token ":" value CRLF, the value of
 * HTAB, SP, visible ASCII or bytes >= 0x80) and a blank line (CRLF)?
 * Returns:
 *   > 0      its length, blank line included (bytes after it are not read)
 *   0        valid so far, not complete: call again with more bytes
 *   -EINVAL  not an HTTP/1.x request head, or malformed: another version,
 *            bare CR or LF, obs-fold, NUL or another control byte, white
 *            space before a field's colon, an empty line before the
 *            request line; as soon as the bytes so far show it
 *   -E2BIG   no end within INJECT_HEAD_MAX bytes, or more than
 *            INJECT_FIELDS_MAX header lines
 * Reads at most INJECT_HEAD_MAX bytes.
 */
int inject_head_len(const uint8_t *buf, size_t len);

/*
 * Rewrite the head head[0..len) (len as inject_head_len() returned it:
 * anything else is -EINVAL) with pairs[0..npairs), appending the result
 * to out: the request line as it was, every field as it was except for
 * its value's placeholders and the fields dropped (see above), then
 * "Connection: close" and the blank line.
 *
 * host, a lower-case name without a trailing dot, is where the request is
 * going. A request that names another host could reach another site
 * behind the same address (a CDN routes by name), so the head must have
 * exactly one Host field whose name part (a port may follow) is host, in
 * any case, one trailing dot allowed; and an absolute-form target
 * (http:// or https://) must name host too, with no user info. The target
 * must be origin-form ("/..."), absolute-form or "*".
 *
 * Returns 0, or with out as it was:
 *   -EPERM   a TRACE request
 *   -EINVAL  a head that is not len long, a target of another form, two
 *            Host fields, a pair whose placeholder or value is not valid,
 *            npairs > INJECT_PAIRS_MAX
 *   -EACCES  no Host field, or Host or the target's authority names
 *            another host
 *   -E2BIG   the rewritten head would pass INJECT_REWRITE_MAX bytes, or
 *            INJECT_FIELDS_MAX fields (so it is one that inject_head_len()
 *            takes, but for its length, which may pass INJECT_HEAD_MAX)
 *   and out's own failures (-ENOMEM; -E2BIG past its max).
 */
int inject_rewrite(const uint8_t *head, size_t len, const char *host,
		   const struct inject_pair *pairs, size_t npairs, struct buf *out);

/* ---- the response scrubber ----------------------------------------------- */

/*
 * A stream filter: what goes in comes out, in order and of the same
 * length, except that every byte of every occurrence of any pair's value
 * is a '*' (same length, so Content-Length and chunk sizes stay right).
 * Occurrences may overlap, and may span any split of the stream into
 * chunks: the scrubber holds back the bytes after the last newline it has
 * seen (no value holds one), at most the longest value - 1 bytes, until
 * more come or the stream ends. What it holds back does not depend on
 * what the bytes are, so its timing tells nothing of a value.
 *
 * It sees the bytes as sent: a value that the server compressed, or split
 * with chunked framing, is not recognised.
 */
struct inject_scrub {
	const struct inject_pair *pairs; /* borrowed: alive as long as the scrubber */
	size_t npairs;
	size_t vlen[INJECT_PAIRS_MAX];	     /* each value's length */
	size_t keep;			     /* longest value - 1 */
	size_t ncarry;			     /* bytes held back */
	size_t masked;			     /* of which the first masked bytes become '*' */
	uint8_t carry[INJECT_VALUE_MAX - 1]; /* the bytes as they came */
};

/*
 * Start a scrubber for pairs[0..npairs) (only the values count; npairs may
 * be 0: the stream passes as it is). 0, or -EINVAL for npairs >
 * INJECT_PAIRS_MAX or a value that is not valid (s is then not usable).
 */
int inject_scrub_init(struct inject_scrub *s, const struct inject_pair *pairs, size_t npairs);

/*
 * Feed the next len bytes of the stream; append to out what can be
 * decided (the bytes held back come out later). 0, or out's failure, with
 * out and s as they were.
 */
int inject_scrub_feed(struct inject_scrub *s, const uint8_t *data, size_t len, struct buf *out);

/*
 * At the end of the stream: append the bytes held back to out. 0, or
 * out's failure with out and s as they were. s is then empty, ready for
 * another stream.
 */
int inject_scrub_flush(struct inject_scrub *s, struct buf *out);

#endif
