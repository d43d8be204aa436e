/*
 * websocket.h - WebSocket frames (RFC 6455) as pure code on byte buffers:
 * the header of a frame read strictly, a header written, masking, and
 * the handshake's key checked. No sockets, no allocation.
 *
 * agentboxd's terminals (exec with "tty") speak WebSocket after the
 * upgrade of the exec request (docs/api.md: "A terminal"); the agentbox
 * command speaks it on the other side. What a frame may carry is bounded
 * by the caller: ws_frame_parse() refuses a payload above max with
 * -EMSGSIZE before any of it is read, which the server answers with the
 * close code 1009. A control frame (close, ping, pong) is at most
 * WS_CONTROL_MAX bytes and never fragmented (the RFC's rule).
 *
 * Strict: reserved bits set (no extension is ever negotiated), an unknown
 * opcode, a control frame fragmented or over WS_CONTROL_MAX, a 64-bit
 * length with its top bit set, and a length not in its shortest form are
 * -EPROTO (close code 1002).
 */
#ifndef AGENTBOX_BASE_WEBSOCKET_H
#define AGENTBOX_BASE_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest frame header: 2 bytes, a 64-bit length, a mask. */
#define WS_HEADER_MAX 14
/* The most payload a control frame carries (RFC 6455 5.5). */
#define WS_CONTROL_MAX 125
/* What the server appends to the client's key before the SHA-1 (RFC 6455 1.3). */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* Sec-WebSocket-Key: the base64 of 16 bytes, 24 characters. */
#define WS_KEY_LEN 24
/* Sec-WebSocket-Accept: the base64 of a SHA-1 (20 bytes), 28 characters. */
#define WS_ACCEPT_LEN 28

enum ws_opcode {
	WS_OP_CONTINUATION = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xa,
};

/* Close codes (RFC 6455 7.4.1) agentbox sends. */
enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,	/* the daemon stops */
	WS_CLOSE_PROTOCOL_ERROR = 1002, /* a malformed or unmasked frame */
	WS_CLOSE_UNSUPPORTED = 1003,	/* a fragmented text message */
	WS_CLOSE_INVALID_DATA = 1007,	/* a control message that is not the JSON it must be */
	WS_CLOSE_POLICY = 1008,		/* an unknown control message */
	WS_CLOSE_TOO_BIG = 1009,	/* a frame above the limit */
	WS_CLOSE_INTERNAL = 1011,	/* the sandbox ended, or the daemon failed */
};

struct ws_frame {
	bool fin;
	enum ws_opcode opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t len;	   /* of the payload */
	size_t header_len; /* bytes of the header: the payload starts there */
};

/* Is op a control frame's opcode (close, ping, pong)? */
bool ws_opcode_is_control(unsigned op);

/*
 * Read the header of the frame at buf[0..n). 1 with *ret filled, 0 when
 * buf does not hold the whole header yet, -EPROTO when it is malformed
 * (above), -EMSGSIZE when its payload is longer than max.
 */
int ws_frame_parse(const uint8_t *buf, size_t n, uint64_t max, struct ws_frame *ret);

/*
 * Write the header of a frame (fin set) with opcode and a payload of len
 * bytes into out; masked with mask when mask is not NULL (a client's
 * frames are, a server's never). Returns the header's length.
 */
size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode opcode, uint64_t len,
		       const uint8_t *mask);

/*
 * XOR data[0..n) with mask, data being the payload's bytes from offset
 * off on (so a payload can be unmasked in pieces). Masking and unmasking
 * are the same.
 */
void ws_mask(uint8_t *data, size_t n, const uint8_t mask[4], uint64_t off);

/* Is key a valid Sec-WebSocket-Key: the base64 of exactly 16 bytes? */
bool ws_key_is_valid(const char *key);

#endif
