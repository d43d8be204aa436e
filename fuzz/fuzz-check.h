/*
 * fuzz-check.h - what every libFuzzer target here shares: CHECK(), which
 * aborts whether or not NDEBUG is set (a fuzzer needs the crash), and the
 * entry point's prototype. The unit tests include the targets too, so
 * their checks run in every build.
 */
#ifndef AGENTBOX_FUZZ_CHECK_H
#define AGENTBOX_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
