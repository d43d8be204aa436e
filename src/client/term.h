/*
 * term.h - text from elsewhere (a task, a sandbox, agentboxd), made safe
 * to show on a terminal.
 *
 * A terminal obeys what it is sent: ESC and C1 sequences move the cursor,
 * clear the screen, set the window title or answer back; a bidi override
 * makes "exe.png" read "gnp.exe"; a carriage return writes over a line.
 * Every string the agentbox command prints that it did not write itself
 * goes through term_escape(), which turns each of these into a visible,
 * unambiguous escape and passes everything else unchanged:
 *
 *	what                                   escaped as
 *	\n, \t (unless the caller keeps them), \r   \n  \t  \r
 *	other C0 controls (0x00-0x1f), DEL           \x1b, \x7f, ...
 *	C1 controls U+0080-U+009F (valid UTF-8)      \u009b, ...
 *	bidi controls U+061C, U+200E, U+200F,        \u202e, ...
 *	  U+202A-U+202E, U+2066-U+2069
 *	a byte that is not part of valid UTF-8       \x9b, \xff, ... (one each)
 *	  (a raw C1 byte, a stray continuation,
 *	  overlong forms, surrogates, > U+10FFFF)
 *	a backslash                                  \\
 *
 * Hex digits are lowercase. The backslash is doubled so that the result
 * reads one way only: "\x1b" on the screen is an ESC, "\\x1b" the four
 * characters the task wrote. Printable UTF-8 (including non-ASCII text)
 * passes as it is.
 *
 * TERM_JSON is for text that a JSON encoder wrote (jansson's output): the
 * escapes are JSON's own, in jansson's uppercase hex (\u009B, \u202E,
 * \u007F), backslashes are left as the encoder wrote them, and the result
 * is the same JSON value, still valid JSON. A byte that is not UTF-8 (an
 * encoder never writes one) becomes \uFFFD.
 *
 * Nothing here allocates except through the struct buf the caller passes;
 * nothing prints.
 */
#ifndef AGENTBOX_CLIENT_TERM_H
#define AGENTBOX_CLIENT_TERM_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>

enum {
	TERM_KEEP_NEWLINE = 1 << 0, /* \n passes as it is */
	TERM_KEEP_TAB = 1 << 1,	    /* \t passes as it is */
	TERM_JSON = 1 << 2,	    /* the text is JSON: JSON's escapes, backslashes as they are */
};

/*
 * How the agentbox command sets off a line of its own among escaped text
 * on a terminal (an attempt header of `agentbox logs`): reverse video. An
 * escaped text holds no ESC, so it can never turn reverse video on.
 */
#define TERM_MARK_ON  "\033[7m"
#define TERM_MARK_OFF "\033[27m"

/* The longest escape one unit turns into ("\u202e"), with its NUL. */
#define TERM_UNIT_MAX 8

/*
 * One unit of s[0..len) (len >= 1): a character, or one byte that is not
 * part of valid UTF-8. Its form for the terminal goes to out (NUL-
 * terminated, at most TERM_UNIT_MAX - 1 bytes; the character's own bytes
 * when it passes). Returns the bytes of s it stands for (>= 1), or 0 when
 * more is true and s ends in the middle of what may still become a valid
 * character: the caller then feeds those bytes again with what follows.
 */
size_t term_escape_unit(const char *s, size_t len, unsigned flags, bool more,
			char out[TERM_UNIT_MAX]);

/* Append the escaped form of s[0..len) to out. 0 or out's failure (-ENOMEM, -E2BIG). */
int term_escape(const char *s, size_t len, unsigned flags, struct buf *out);

/* Does s[0..len) pass term_escape() unchanged? */
bool term_is_safe(const char *s, size_t len, unsigned flags);

/*
 * A stream in pieces (a followed log): a character cut between two pieces
 * is escaped whole once the rest of it arrives. Zero it, set flags, feed,
 * finish (which escapes the bytes held back, if the stream ends on them).
 */
struct term_stream {
	unsigned flags;
	char held[4]; /* the start of a character the last piece cut */
	size_t held_len;
};

int term_stream_feed(struct term_stream *t, const char *s, size_t len, struct buf *out);
int term_stream_finish(struct term_stream *t, struct buf *out);

/*
 * A one-line view in a fixed buffer (a column of `agentbox ps`, the live
 * line of `agentbox wait`): pieces are appended escaped (nothing kept:
 * no \n, no \t), and when they do not fit, the text is cut between two
 * units and ends in "...". buf is always NUL-terminated (size >= 1).
 */
struct term_line {
	char *buf;
	size_t size, len;
	size_t fit; /* the longest length so far after which "..." still fits */
	bool cut;
};

void term_line_init(struct term_line *l, char *buf, size_t size);
void term_line_add(struct term_line *l, const char *s, size_t n);
void term_line_adds(struct term_line *l, const char *s);

#endif
