/*
 * test-websocket.c - WebSocket frames (base/websocket.h): RFC 6455's
 * examples, the three length forms both ways, masking in pieces, and
 * every malformed header refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "base/websocket.h"

/* RFC 6455 5.7: a single-frame masked text message "Hello". */
static void test_rfc_masked_hello(void **state)
{
	(void)state;
	uint8_t f[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
	struct ws_frame h;
	assert_int_equal(ws_frame_parse(f, sizeof(f), 125, &h), 1);
	assert_true(h.fin && h.masked);
	assert_int_equal(h.opcode, WS_OP_TEXT);
	assert_int_equal(h.len, 5);
	assert_int_equal(h.header_len, 6);
	ws_mask(f + 6, 2, h.mask, 0); /* in two pieces: the offset keeps the mask's phase */
	ws_mask(f + 8, 3, h.mask, 2);
	assert_memory_equal(f + 6, "Hello", 5);
	/* and the same header written back */
	uint8_t out[WS_HEADER_MAX];
	assert_int_equal(ws_frame_header(out, WS_OP_TEXT, 5, h.mask), 6);
	assert_memory_equal(out, f, 6);
}

/* RFC 6455 5.7: an unmasked ping "Hello", and the header of a 256-byte and a 64 KiB binary frame.
 */
static void test_rfc_lengths(void **state)
{
	(void)state;
	uint8_t out[WS_HEADER_MAX];
	static const uint8_t ping[] = {0x89, 0x05};
	assert_int_equal(ws_frame_header(out, WS_OP_PING, 5, NULL), 2);
	assert_memory_equal(out, ping, 2);
	static const uint8_t b256[] = {0x82, 0x7e, 0x01, 0x00};
	assert_int_equal(ws_frame_header(out, WS_OP_BINARY, 256, NULL), 4);
	assert_memory_equal(out, b256, 4);
	static const uint8_t b64k[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00};
	assert_int_equal(ws_frame_header(out, WS_OP_BINARY, 65536, NULL), 10);
	assert_memory_equal(out, b64k, 10);
	struct ws_frame h;
	assert_int_equal(ws_frame_parse(b64k, sizeof(b64k), 65536, &h), 1);
	assert_int_equal(h.len, 65536);
	assert_int_equal(h.header_len, 10);
	assert_int_equal(ws_frame_parse(b64k, sizeof(b64k), 65535, &h), -EMSGSIZE);
	/* every prefix of a header is "not yet", never an error */
	for (size_t n = 0; n < sizeof(b64k); n++)
		assert_int_equal(ws_frame_parse(b64k, n, 65536, &h), 0);
}

static void test_malformed_headers(void **state)
{
	(void)state;
	struct ws_frame h;
	static const uint8_t cases[][10] = {
	    {0xc2, 0x00},	      /* RSV1: no extension is negotiated */
	    {0x83, 0x00},	      /* opcode 3: reserved */
	    {0x09, 0x00},	      /* a ping not final: control frames are whole */
	    {0x89, 0x7e, 0x00, 0x7e}, /* a ping above 125 bytes */
	    {0x82, 0x7e, 0x00, 0x05}, /* 5 in the 16-bit form: not the shortest */
	    {0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, /* 65535 in the 64-bit form */
	    {0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0},	/* the top bit of a 64-bit length */
	};
	static const size_t lens[] = {2, 2, 2, 4, 4, 10, 10};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		assert_int_equal(ws_frame_parse(cases[i], lens[i], UINT64_MAX, &h), -EPROTO);
}

static void test_keys(void **state)
{
	(void)state;
	assert_true(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZQ==")); /* RFC 6455 1.3 */
	assert_false(ws_key_is_valid(NULL));
	assert_false(ws_key_is_valid(""));
	assert_false(ws_key_is_valid("c2hvcnQ="));		   /* 5 bytes */
	assert_false(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZQ=!")); /* not base64 */
	assert_false(ws_key_is_valid("dGhlIHNhbXBsZSBub25jZXM=")); /* 17 bytes */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rfc_masked_hello),
	    cmocka_unit_test(test_rfc_lengths),
	    cmocka_unit_test(test_malformed_headers),
	    cmocka_unit_test(test_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
