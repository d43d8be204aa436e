/* websocket.c - WebSocket frames as pure code (websocket.h). */
#include "base/websocket.h"

#include "base/base64.h"
#include "base/buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool ws_opcode_is_control(unsigned op)
{
	return op == WS_OP_CLOSE || op == WS_OP_PING || op == WS_OP_PONG;
}

static bool opcode_is_known(unsigned op)
{
	return op == WS_OP_CONTINUATION || op == WS_OP_TEXT || op == WS_OP_BINARY ||
	       ws_opcode_is_control(op);
}

int ws_frame_parse(const uint8_t *buf, size_t n, uint64_t max, struct ws_frame *ret)
{
	if (n < 2)
		return 0;
	struct ws_frame f = {
	    .fin = buf[0] & 0x80, .opcode = buf[0] & 0x0f, .masked = buf[1] & 0x80};
	if (buf[0] & 0x70 || !opcode_is_known(f.opcode))
		return -EPROTO; /* no extension is ever negotiated */
	uint64_t len = buf[1] & 0x7f;
	size_t need = 2;
	if (len == 126) {
		need += 2;
		if (n < need)
			return 0;
		len = (uint64_t)buf[2] << 8 | buf[3];
		if (len < 126)
			return -EPROTO;
	} else if (len == 127) {
		need += 8;
		if (n < need)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | buf[2 + i];
		if (len >> 63 || len <= 0xffff)
			return -EPROTO;
	}
	if (ws_opcode_is_control(f.opcode) && (!f.fin || len > WS_CONTROL_MAX))
		return -EPROTO;
	if (f.masked) {
		if (n < need + 4)
			return 0;
		memcpy(f.mask, buf + need, 4);
		need += 4;
	}
	if (len > max)
		return -EMSGSIZE;
	f.len = len;
	f.header_len = need;
	*ret = f;
	return 1;
}

size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode opcode, uint64_t len,
		       const uint8_t *mask)
{
	size_t n = 0;
	out[n++] = (uint8_t)(0x80 | opcode);
	uint8_t m = mask ? 0x80 : 0;
	if (len < 126) {
		out[n++] = (uint8_t)(m | len);
	} else if (len <= 0xffff) {
		out[n++] = m | 126;
		out[n++] = (uint8_t)(len >> 8);
		out[n++] = (uint8_t)len;
	} else {
		out[n++] = m | 127;
		for (int i = 7; i >= 0; i--)
			out[n++] = (uint8_t)(len >> (8 * i));
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		data[i] ^= mask[(off + i) % 4];
}

bool ws_key_is_valid(const char *key)
{
	if (!key || strlen(key) != WS_KEY_LEN)
		return false;
	struct buf b = {.max = 32};
	bool ok = base64_decode(&b, key, WS_KEY_LEN) == 0 && b.len == 16;
	buf_release(&b);
	return ok;
}
