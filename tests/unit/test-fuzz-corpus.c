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

#include <dirent.h>

#include "../../fuzz/fuzz-task-request.c"

#define CORPUS_MIN 20 /* fewer means the corpus went missing */

static void test_replay_corpus(void **state)
{
	(void)state;
	DIR *d = opendir(FUZZ_CORPUS_DIR);
	if (!d)
		fail_msg("cannot open %s", FUZZ_CORPUS_DIR);
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", FUZZ_CORPUS_DIR, de->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		static uint8_t buf[API_BODY_MAX + 2];
		size_t len = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, len);
		n++;
	}
	closedir(d);
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
