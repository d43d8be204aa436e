/*
 * base64.h - base64 (RFC 4648, the standard alphabet, with '=' padding),
 * for bytes that must travel in JSON: command output that is not UTF-8
 * text, or that holds NULs (api.md: "stdout_encoding": "base64").
 *
 * Both directions append to a struct buf (buf.h) and so share its sticky
 * failure and its cap. Decoding is strict: every character must be of
 * the alphabet, the length a multiple of 4, padding only at the end, and
 * the unused bits of the last group zero, so one text decodes to one
 * byte string and back.
 */
#ifndef AGENTBOX_BASE_BASE64_H
#define AGENTBOX_BASE_BASE64_H

#include "base/buf.h"

#include <stddef.h>

/* The length of the encoding of n bytes (without a NUL). */
size_t base64_encoded_len(size_t n);

/* Append the encoding of data[0..len) to b. 0, or b's failure. */
int base64_encode(struct buf *b, const void *data, size_t len);

/*
 * Append the bytes text[0..len) encodes to b. 0, -EINVAL for a text that
 * is not strict base64 (b is then as it was), or b's failure.
 */
int base64_decode(struct buf *b, const char *text, size_t len);

#endif
