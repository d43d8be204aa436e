/* base64.c - base64 both ways (base64.h). */
#include "base/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

int base64_encode(struct buf *b, const void *data, size_t len)
{
	if (len > (SIZE_MAX - 3) / 4 * 3)
		return buf_fail(b, -E2BIG);
	int r = buf_reserve(b, base64_encoded_len(len));
	if (r < 0)
		return r;
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t left = len - i;
		if (left > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (left > 2)
			v |= p[i + 2];
		char out[4] = {alphabet[v >> 18 & 63], alphabet[v >> 12 & 63],
			       left > 1 ? alphabet[v >> 6 & 63] : '=',
			       left > 2 ? alphabet[v & 63] : '='};
		(void)buf_append(b, out, sizeof(out));
	}
	return b->failed;
}

/* The value of c in the alphabet, or -1. */
static int value_of(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int base64_decode(struct buf *b, const char *text, size_t len)
{
	if (len % 4)
		return -EINVAL;
	size_t mark = b->len;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
		uint32_t v = 0;
		for (int k = 0; k < 4; k++) {
			int x = k < 4 - pad ? value_of(text[i + k]) : 0;
			if (x < 0) {
				buf_truncate(b, mark);
				return -EINVAL;
			}
			v = v << 6 | (uint32_t)x;
		}
		/* the bits a padded group does not use must be zero */
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff))) {
			buf_truncate(b, mark);
			return -EINVAL;
		}
		unsigned char out[3] = {v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff};
		if (buf_append(b, out, (size_t)(3 - pad)) < 0)
			return b->failed;
	}
	return 0;
}
