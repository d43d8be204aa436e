/*
 * corpus-replay.h - replay a checked-in fuzz corpus (fuzz/corpus/NAME/)
 * through its target's entry function, in the ordinary build (ASan+UBSan
 * in CI): no clang or libFuzzer is needed to keep every input that once
 * found a bug from finding it again. For a test that includes its fuzz
 * target's source; FUZZ_CORPUS_DIR comes from tests/unit/meson.build.
 */
#ifndef AGENTBOX_TESTS_CORPUS_REPLAY_H
#define AGENTBOX_TESTS_CORPUS_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each input of dir, read whole into a buffer of its exact size (ASan sees an over-read). */
static size_t corpus_replay(const char *dir, size_t max, int (*fn)(const uint8_t *, size_t))
{
	DIR *d = opendir(dir);
	if (!d)
		fail_msg("cannot open %s", dir);
	size_t n = 0;
	struct dirent *de;
	uint8_t *buf = malloc(max + 1);
	assert_non_null(buf);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		size_t len = fread(buf, 1, max + 1, f);
		fclose(f);
		if (len > max)
			fail_msg("%s is longer than the target takes (%zu bytes)", path, max);
		uint8_t *exact = malloc(len ? len : 1);
		assert_non_null(exact);
		memcpy(exact, buf, len);
		fn(exact, len);
		free(exact);
		n++;
	}
	free(buf);
	closedir(d);
	return n;
}

#endif
