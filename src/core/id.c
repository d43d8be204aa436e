#include "core/id.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Crockford's base32: no I, L, O, U, so ids read aloud without doubt. */
static const char base32[] = "0123456789abcdefghjkmnpqrstvwxyz";

int id_new(const char *prefix, char *id, size_t size)
{
	size_t len = strlen(prefix);
	if (len + ID_RANDOM_CHARS + 1 > size)
		return -EINVAL;
	unsigned char rnd[ID_RANDOM_CHARS];
	size_t got = 0;
	while (got < sizeof(rnd)) {
		ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	memcpy(id, prefix, len);
	for (size_t i = 0; i < ID_RANDOM_CHARS; i++)
		id[len + i] = base32[rnd[i] & 31];
	id[len + ID_RANDOM_CHARS] = '\0';
	return 0;
}

bool id_is_valid(const char *prefix, const char *s)
{
	if (!s || strncmp(s, prefix, strlen(prefix)) != 0)
		return false;
	s += strlen(prefix);
	size_t n = 0;
	for (; s[n]; n++)
		if (!strchr(base32, s[n]))
			return false;
	return n == ID_RANDOM_CHARS;
}
