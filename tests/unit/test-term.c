/*
 * test-term.c - text made safe for a terminal (client/term.h): every
 * control, C1 and bidi character and every byte that is not UTF-8 comes out
 * as a visible escape, printable UTF-8 as it is, whole or in pieces; the
 * JSON form is the same JSON value; one-line views cut between escapes.
 * And a task's output on a terminal (client_logs_render()): an attempt
 * header is marked only when no reading of the body makes it the task's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "client/term.h"

/* s (len bytes) escaped with flags, as a malloc'd C string. */
static char *esc_n(const char *s, size_t len, unsigned flags)
{
	struct buf b = {0};
	assert_int_equal(term_escape(s, len, flags, &b), 0);
	char *out;
	assert_int_equal(buf_steal(&b, &out, NULL), 0);
	return out;
}

static void expect_n(const char *s, size_t len, unsigned flags, const char *want)
{
	char *got = esc_n(s, len, flags);
	assert_string_equal(got, want);
	free(got);
}

static void expect(const char *s, unsigned flags, const char *want)
{
	expect_n(s, strlen(s), flags, want);
}

static void test_printable_passes(void **state)
{
	(void)state;
	const char *same[] = {
	    "",
	    "plain ASCII, with ~ and [brackets] {} 'quotes' \"double\"",
	    "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", /* é, 日本, an emoji */
	    "\xc2\xa0",						      /* U+00A0: just past C1 */
	    "\xe2\x80\x8d \xe2\x80\x90 \xe2\x80\xa9 \xe2\x80\xaf",    /* U+200D, 2010, 2029, 202F */
	    "\xe2\x81\xa5 \xe2\x81\xaa",			      /* U+2065, U+206A */
	    "\xd8\x9b \xd8\x9d",				      /* U+061B, U+061D */
	    "\xf4\x8f\xbf\xbf",					      /* U+10FFFF */
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		expect(same[i], 0, same[i]);
		assert_true(term_is_safe(same[i], strlen(same[i]), 0));
	}
}

static void test_c0_and_del(void **state)
{
	(void)state;
	for (unsigned c = 0; c < 0x20; c++) {
		char in = (char)c, want[8];
		if (c == '\n' || c == '\t' || c == '\r')
			snprintf(want, sizeof(want), "\\%c",
				 c == '\n'   ? 'n'
				 : c == '\t' ? 't'
					     : 'r');
		else
			snprintf(want, sizeof(want), "\\x%02x", c);
		expect_n(&in, 1, 0, want);
		assert_false(term_is_safe(&in, 1, 0));
	}
	expect("\x7f", 0, "\\x7f");
	expect("\x1b[2J\x1b]0;title\x07", 0, "\\x1b[2J\\x1b]0;title\\x07");
	expect("a\nb\tc\rd", 0, "a\\nb\\tc\\rd");
	expect("a\nb\tc\rd", TERM_KEEP_NEWLINE, "a\nb\\tc\\rd");
	expect("a\nb\tc\rd", TERM_KEEP_NEWLINE | TERM_KEEP_TAB, "a\nb\tc\\rd");
	assert_true(term_is_safe("a\nb", 3, TERM_KEEP_NEWLINE));
}

static void test_c1_as_utf8_and_as_bytes(void **state)
{
	(void)state;
	for (unsigned c = 0x80; c <= 0x9f; c++) {
		char utf8[2] = {(char)0xc2, (char)c}, raw = (char)c, want[16];
		snprintf(want, sizeof(want), "\\u%04x", c);
		expect_n(utf8, 2, 0, want);
		snprintf(want, sizeof(want), "\\x%02x", c);
		expect_n(&raw, 1, 0, want);
	}
	expect("\xc2\x9b"
	       "31m",
	       0, "\\u009b31m");
}

static void test_bidi_controls(void **state)
{
	(void)state;
	const unsigned bidi[] = {0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c,
				 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069};
	for (size_t i = 0; i < sizeof(bidi) / sizeof(bidi[0]); i++) {
		unsigned cp = bidi[i];
		char in[4], want[16];
		size_t n;
		if (cp < 0x800) {
			in[0] = (char)(0xc0 | (cp >> 6));
			in[1] = (char)(0x80 | (cp & 0x3f));
			n = 2;
		} else {
			in[0] = (char)(0xe0 | (cp >> 12));
			in[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
			in[2] = (char)(0x80 | (cp & 0x3f));
			n = 3;
		}
		snprintf(want, sizeof(want), "\\u%04x", cp);
		expect_n(in, n, 0, want);
	}
	expect("invoice_\xe2\x80\xaegnp.exe", 0, "invoice_\\u202egnp.exe");
}

static void test_invalid_utf8_byte_by_byte(void **state)
{
	(void)state;
	expect("\xff", 0, "\\xff");
	expect("\xc0\x80", 0, "\\xc0\\x80");		       /* overlong NUL */
	expect("\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf");	       /* overlong / */
	expect("\xf0\x80\x80\xaf", 0, "\\xf0\\x80\\x80\\xaf"); /* overlong / */
	expect("\xed\xa0\x80", 0, "\\xed\\xa0\\x80");	       /* a surrogate */
	expect("\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
	expect("\xf5\x80", 0, "\\xf5\\x80");
	expect("\xe2\x28\xa1ok", 0, "\\xe2(\\xa1ok"); /* a bad sequence swallows nothing */
	expect("end\xe2\x80", 0, "end\\xe2\\x80");    /* cut at the end */
	expect_n("a\0b", 3, 0, "a\\x00b");
}

static void test_backslash_is_unambiguous(void **state)
{
	(void)state;
	expect("C:\\dir", 0, "C:\\\\dir");
	/* an ESC and the four characters "\x1b" look different */
	char *a = esc_n("\x1b", 1, 0), *b = esc_n("\\x1b", 4, 0);
	assert_string_equal(a, "\\x1b");
	assert_string_equal(b, "\\\\x1b");
	free(a);
	free(b);
}

static void test_json_stays_the_same_json(void **state)
{
	(void)state;
	json_t *v = json_pack("{s:s, s:s, s:i}", "note",
			      "\x1b]0;x\x1b\\ \xc2\x9b"
			      "31m \xe2\x80\xae \x7f \\ \xc3\xa9",
			      "\xe2\x80\xaekey", "x", "n", 1);
	assert_non_null(v);
	char *text = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
	assert_non_null(text);
	char *safe = esc_n(text, strlen(text), TERM_JSON | TERM_KEEP_NEWLINE);
	assert_true(term_is_safe(safe, strlen(safe), TERM_KEEP_NEWLINE | TERM_JSON));
	assert_non_null(strstr(safe, "\\u009B31m \\u202E \\u007F \\\\ \xc3\xa9"));
	assert_non_null(strstr(safe, "\"\\u202Ekey\""));
	json_t *back = json_loads(safe, 0, NULL);
	assert_non_null(back);
	assert_true(json_equal(v, back));
	json_decref(back);
	free(safe);
	free(text);
	json_decref(v);
	expect("\"a\xff\"", TERM_JSON, "\"a\\uFFFD\"");
}

static void test_unit_waits_for_a_cut_character(void **state)
{
	(void)state;
	char out[TERM_UNIT_MAX];
	assert_int_equal(term_escape_unit("\xe2\x80", 2, 0, true, out), 0);
	assert_int_equal(term_escape_unit("\xe2\x80", 2, 0, false, out), 1);
	assert_string_equal(out, "\\xe2");
	assert_int_equal(term_escape_unit("\xe2\x80\xae", 3, 0, true, out), 3);
	assert_string_equal(out, "\\u202e");
	assert_int_equal(term_escape_unit("\xe2(", 2, 0, true, out), 1); /* cannot become valid */
	assert_int_equal(term_escape_unit("\xc3\xa9", 2, 0, false, out), 2);
	assert_string_equal(out, "\xc3\xa9");
}

/* A stream cut anywhere, in one place or at every byte, escapes as the whole does. */
static void test_stream_in_pieces(void **state)
{
	(void)state;
	const char in[] = "a\xc3\xa9\xe2\x80\xae\xc2\x9b\x1b[1m\xf0\x9f\x98\x80\xe2\x28\xff\n\t\\"
			  "z\xe2\x80";
	size_t len = sizeof(in) - 1;
	unsigned flags = TERM_KEEP_NEWLINE | TERM_KEEP_TAB;
	char *whole = esc_n(in, len, flags);
	for (size_t cut = 0; cut <= len; cut++) {
		struct term_stream t = {.flags = flags};
		struct buf b = {0};
		term_stream_feed(&t, in, cut, &b);
		term_stream_feed(&t, in + cut, len - cut, &b);
		term_stream_finish(&t, &b);
		assert_int_equal(b.failed, 0);
		assert_string_equal(b.data ? b.data : "", whole);
		buf_release(&b);
	}
	struct term_stream t = {.flags = flags};
	struct buf b = {0};
	for (size_t i = 0; i < len; i++)
		term_stream_feed(&t, in + i, 1, &b);
	term_stream_finish(&t, &b);
	assert_string_equal(b.data, whole);
	buf_release(&b);
	free(whole);
}

static void test_line_cuts_between_escapes(void **state)
{
	(void)state;
	char buf[64];
	struct term_line l;
	term_line_init(&l, buf, 4);
	term_line_adds(&l, "abc"); /* fits exactly: not cut */
	assert_string_equal(buf, "abc");
	term_line_init(&l, buf, 10);
	term_line_adds(&l, "abcdefghijkl");
	assert_string_equal(buf, "abcdef...");
	term_line_init(&l, buf, 8);
	term_line_add(&l,
		      "a\x1b"
		      "bcdef",
		      7); /* never half an escape */
	assert_string_equal(buf, "a...");
	term_line_init(&l, buf, 6);
	term_line_adds(&l, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"); /* never half a character */
	assert_string_equal(buf, "\xc3\xa9...");
	term_line_init(&l, buf, sizeof(buf));
	term_line_adds(&l, "k=");
	term_line_adds(&l, "\xe2\x80\xaeright\n");
	assert_string_equal(buf, "k=\\u202eright\\n");
	term_line_init(&l, buf, 1);
	term_line_adds(&l, "x");
	assert_string_equal(buf, "");
}

static void test_format_progress_and_command(void **state)
{
	(void)state;
	char buf[128];
	json_t *p = json_pack("{s:s, s:i}", "stage", "\x1b[2J\xe2\x80\xae", "n", 3);
	client_format_progress(p, buf, sizeof(buf));
	assert_string_equal(buf, "stage=\\x1b[2J\\u202e n=3");
	json_decref(p);
	json_t *c = json_pack("[s, s, s]", "sh", "-c", "echo \xc2\x9b");
	client_format_command(c, buf, sizeof(buf));
	assert_string_equal(buf, "sh -c 'echo \\u009b'");
	json_decref(c);
}

/* ---- client_logs_render() --------------------------------------------- */

#define ON  TERM_MARK_ON
#define OFF TERM_MARK_OFF

static char *render(const char *body, size_t len, int64_t attempts, struct client_logs_view *view)
{
	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	assert_non_null(f);
	assert_int_equal(client_logs_render(body, len, attempts, f, view), 0);
	assert_int_equal(fclose(f), 0);
	return out;
}

static void expect_render(const char *body, int64_t attempts, const char *want, size_t headers,
			  size_t unmarked)
{
	struct client_logs_view view;
	char *got = render(body, strlen(body), attempts, &view);
	assert_string_equal(got, want);
	assert_int_equal(view.headers, headers);
	assert_int_equal(view.unmarked, unmarked);
	free(got);
}

static void test_logs_escapes_output(void **state)
{
	(void)state;
	expect_render("a\x1b[2J\n\xc2\x9b\t\xe2\x80\xae\r\xff\\", 1,
		      "a\\x1b[2J\n\\u009b\t\\u202e\\r\\xff\\\\", 0, 0);
	expect_render("", 0, "", 0, 0);
}

static void test_logs_one_attempt_has_no_header(void **state)
{
	(void)state;
	expect_render("x\n[agentbox: attempt 2]\n", 1, "x\n[agentbox: attempt 2]\n", 0, 1);
	expect_render("[agentbox: attempt 1]\nx\n", 1, "[agentbox: attempt 1]\nx\n", 0, 1);
}

static void test_logs_marks_provable_headers(void **state)
{
	(void)state;
	/* the last attempt forges an earlier header: it cannot be agentboxd's */
	expect_render("[agentbox: attempt 1]\none\n[agentbox: attempt 2]\ntwo\n"
		      "[agentbox: attempt 3]\nthree\n[agentbox: attempt 2]\n",
		      3,
		      ON "[agentbox: attempt 1]" OFF "\none\n" ON "[agentbox: attempt 2]" OFF
			 "\ntwo\n" ON "[agentbox: attempt 3]" OFF
			 "\nthree\n[agentbox: attempt 2]\n",
		      3, 1);
	/* attempt 1 forges attempt 2's: either could be agentboxd's, neither is marked */
	expect_render("[agentbox: attempt 1]\none\n[agentbox: attempt 2]\nstill\n"
		      "[agentbox: attempt 2]\ntwo\n",
		      2,
		      ON "[agentbox: attempt 1]" OFF "\none\n[agentbox: attempt 2]\nstill\n"
			 "[agentbox: attempt 2]\ntwo\n",
		      1, 2);
	/* a forged first header after the real one */
	expect_render("[agentbox: attempt 1]\n[agentbox: attempt 1]\n[agentbox: attempt 2]\n", 2,
		      ON "[agentbox: attempt 1]" OFF "\n[agentbox: attempt 1]\n" ON
			 "[agentbox: attempt 2]" OFF "\n",
		      2, 1);
}

static void test_logs_marks_nothing_it_cannot_prove(void **state)
{
	(void)state;
	const char *body = "[agentbox: attempt 1]\none\n[agentbox: attempt 2]\ntwo\n";
	/* the attempt count is not known, or does not fit the body */
	expect_render(body, -1, body, 0, 2);
	expect_render(body, 3, body, 0, 2);
	/* agentboxd's first header is at byte 0 */
	expect_render("x\n[agentbox: attempt 1]\n[agentbox: attempt 2]\n", 2,
		      "x\n[agentbox: attempt 1]\n[agentbox: attempt 2]\n", 0, 2);
	/* not a header's line: a header is marked only as agentboxd writes it */
	expect_render(
	    "[agentbox: attempt 1]\x1b[2J\n[agentbox: attempt 02]\n[agentbox: attempt 2]", 2,
	    "[agentbox: attempt 1]\\x1b[2J\n[agentbox: attempt 02]\n[agentbox: attempt 2]", 0, 0);
	/* a notice of a cut, in a body that was not cut, is the task's */
	expect_render("[agentbox: output truncated: the first 5 bytes are not shown]\nx\n", 1,
		      "[agentbox: output truncated: the first 5 bytes are not shown]\nx\n", 0, 0);
}

static void test_logs_marks_the_notice_of_a_cut(void **state)
{
	(void)state;
	const char notice[] = "[agentbox: output truncated: the first 7 bytes are not shown]\n";
	size_t nlen = strlen(notice), len = nlen + CLIENT_LOGS_MAX;
	char *body = malloc(len + 1);
	assert_non_null(body);
	memcpy(body, notice, nlen);
	memset(body + nlen, 'x', CLIENT_LOGS_MAX);
	body[len] = '\0';
	memcpy(body + nlen + 10, "\n[agentbox: attempt 2]\n", 23);
	struct client_logs_view view;
	char *out = render(body, len, 2, &view);
	assert_memory_equal(out, ON, strlen(ON));
	assert_memory_equal(out + strlen(ON), notice, nlen - 1);
	const char *rest = out + strlen(ON) + nlen - 1 + strlen(OFF);
	assert_int_equal(strlen(rest), CLIENT_LOGS_MAX + 1); /* the notice's \n, then as it was */
	assert_true(memcmp(rest, body + nlen - 1, CLIENT_LOGS_MAX + 1) == 0);
	assert_int_equal(view.headers, 1);
	assert_int_equal(view.unmarked, 1); /* what came before it is cut: it proves nothing */
	free(out);
	free(body);
}

/*
 * Every body agentboxd could send for 2 or 3 attempts whose outputs are
 * made of a few lines, forged headers among them: a marked line is always
 * one of agentboxd's headers, and with nothing forged every header is.
 */
static const char *const pieces[] = {"a\n", "b", "[agentbox: attempt 1]\n",
				     "[agentbox: attempt 2]\n", "[agentbox: attempt 3]\n"};
#define NPIECES	   5
#define PER_OUTPUT 2

static void check_body(int k, const int *choice)
{
	char body[512];
	size_t len = 0;
	bool real[64] = {false}, forged = false;
	int line = 0;
	char last = '\n';
	for (int a = 1; a <= k; a++) {
		if (last != '\n') {
			body[len++] = '\n';
			line++;
		}
		len +=
		    (size_t)snprintf(body + len, sizeof(body) - len, "[agentbox: attempt %d]\n", a);
		real[line++] = true;
		last = '\n';
		for (int p = 0; p < PER_OUTPUT; p++) {
			int c = choice[(a - 1) * PER_OUTPUT + p];
			if (c < 0)
				continue;
			const char *s = pieces[c];
			forged |= c >= 2;
			memcpy(body + len, s, strlen(s));
			len += strlen(s);
			if (s[strlen(s) - 1] == '\n')
				line++;
			last = s[strlen(s) - 1];
		}
	}
	body[len] = '\0';
	struct client_logs_view view;
	char *out = render(body, len, k, &view);
	size_t marked = 0;
	line = 0;
	for (char *p = out; *p; line++) {
		if (strncmp(p, ON, strlen(ON)) == 0) {
			assert_true(real[line]);
			marked++;
		}
		char *nl = strchr(p, '\n');
		if (!nl)
			break;
		p = nl + 1;
	}
	assert_int_equal(marked, view.headers);
	if (!forged)
		assert_int_equal(marked, (size_t)k);
	free(out);
}

static void test_logs_never_marks_a_forged_header(void **state)
{
	(void)state;
	for (int k = 2; k <= 3; k++) {
		int slots = k * PER_OUTPUT, total = 1;
		for (int i = 0; i < slots; i++)
			total *= NPIECES + 1;
		for (int n = 0; n < total; n++) {
			int choice[3 * PER_OUTPUT], v = n;
			for (int i = 0; i < slots; i++) {
				choice[i] = v % (NPIECES + 1) - 1; /* -1: nothing */
				v /= NPIECES + 1;
			}
			check_body(k, choice);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_printable_passes),
	    cmocka_unit_test(test_c0_and_del),
	    cmocka_unit_test(test_c1_as_utf8_and_as_bytes),
	    cmocka_unit_test(test_bidi_controls),
	    cmocka_unit_test(test_invalid_utf8_byte_by_byte),
	    cmocka_unit_test(test_backslash_is_unambiguous),
	    cmocka_unit_test(test_json_stays_the_same_json),
	    cmocka_unit_test(test_unit_waits_for_a_cut_character),
	    cmocka_unit_test(test_stream_in_pieces),
	    cmocka_unit_test(test_line_cuts_between_escapes),
	    cmocka_unit_test(test_format_progress_and_command),
	    cmocka_unit_test(test_logs_escapes_output),
	    cmocka_unit_test(test_logs_one_attempt_has_no_header),
	    cmocka_unit_test(test_logs_marks_provable_headers),
	    cmocka_unit_test(test_logs_marks_nothing_it_cannot_prove),
	    cmocka_unit_test(test_logs_marks_the_notice_of_a_cut),
	    cmocka_unit_test(test_logs_never_marks_a_forged_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
