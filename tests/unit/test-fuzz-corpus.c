/*
 * test-fuzz-corpus.c - replay the checked-in corpus of
 * fuzz/fuzz-task-request.c through the same entry function, in the
 * ordinary build (ASan+UBSan in CI), so no clang or libFuzzer is needed
 * to keep every input that once found a bug from finding it again.
 *
 * FUZZ_CORPUS_DIR comes from the build (src/api/meson.build).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../fuzz/fuzz-task-request.c"
#include "corpus-replay.h"

#define CORPUS_MIN 20 /* fewer means the corpus went missing */

static void test_replay_corpus(void **state)
{
	(void)state;
	size_t n = corpus_replay(FUZZ_CORPUS_DIR, API_BODY_MAX + 1, LLVMFuzzerTestOneInput);
	if (n < CORPUS_MIN)
		fail_msg("only %zu inputs in %s", n, FUZZ_CORPUS_DIR);
	printf("replayed %zu inputs\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
