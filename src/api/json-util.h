/*
 * json-util.h - the JSON the API writes, and the little it reads by hand.
 *
 * The API writes into a struct buf (base/buf.h), whose failure is sticky
 * (once an append fails, out of memory or past the cap, every later
 * append does nothing and buf_steal() reports the first failure, so a
 * writer checks once at the end instead of after every call). The JSON
 * writers below append to one.
 *
 * json_put() writes a jansson value in the canonical form of the API:
 * compact, object members sorted by key (bytewise), strings escaped
 * minimally (", \ and control characters; everything else as UTF-8),
 * integers in decimal, reals in the shortest form that reads back as the
 * same double, always with a '.' or an exponent so they stay reals.
 *
 * Parsing untrusted JSON is jansson's job (task-request.c); this file only
 * bounds what that parse may cost before it starts (json_limits_check()),
 * and scans our own stored JSON for a member's raw text without building
 * a tree (json_member_raw()).
 */
#ifndef AGENTBOX_API_JSON_UTIL_H
#define AGENTBOX_API_JSON_UTIL_H

#include "base/buf.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * A JSON string of n bytes of s, quoted and escaped. Bytes that are not
 * well-formed UTF-8 become U+FFFD, so the output is always valid JSON.
 */
void json_put_str(struct buf *b, const char *s, size_t n);
static inline void json_put_strz(struct buf *b, const char *s)
{
	json_put_str(b, s, strlen(s));
}

/* A JSON string, or null when s is NULL. */
void json_put_str_or_null(struct buf *b, const char *s);

/* v in the canonical form above. */
void json_put(struct buf *b, const json_t *v);

/* Is s[0..n) well-formed UTF-8 (no overlongs, no surrogates)? */
bool utf8_is_valid(const char *s, size_t n);

/*
 * What parsing a JSON text may cost, bounded before the parse. jansson
 * builds one allocation or more for every value (a few hundred bytes at
 * most: an empty object is the largest), recursing once per level, so a
 * 4 MiB text of "[[],[],...]" (1.4 million values) once cost 445 MB
 * before anything could refuse it. Depth and values bound the tree; the
 * bytes of its strings and keys are bounded by the text's own length.
 */
struct json_limits {
	size_t depth_max;  /* arrays and objects nested in one another */
	size_t values_max; /* values in all: the root, array elements, object members */
};

enum json_excess {
	JSON_WITHIN_LIMITS = 0,
	JSON_TOO_DEEP,
	JSON_TOO_MANY_VALUES,
};

/*
 * Which of lim the JSON text s[0..n) passes first (JSON_WITHIN_LIMITS if
 * neither), in one pass that allocates nothing. Brackets and commas inside
 * strings do not count. On malformed text it still counts every value the
 * parser could build before it fails, so it can run before parsing: a text
 * the parser accepts has exactly the counted values.
 */
enum json_excess json_limits_check(const char *s, size_t n, const struct json_limits *lim);

/*
 * In the JSON object text `json` (well-formed, as the store keeps it),
 * find the top-level member `key` and point *ret at the raw text of its
 * value, *ret_len bytes. 0, -ENOENT if absent, -EINVAL if the text is not
 * an object this scanner can walk.
 */
int json_member_raw(const char *json, const char *key, const char **ret, size_t *ret_len);

#endif
