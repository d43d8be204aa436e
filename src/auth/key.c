/*
 * key.c - API keys: text, parsing, hashes. See key.h.
 */
#include "auth/key.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* Crockford's base32, lower case: the alphabet of core/id.c. */
static const char base32[] = "0123456789abcdefghjkmnpqrstvwxyz";

#define BEARER	   "Bearer "
#define BEARER_LEN (sizeof(BEARER) - 1)

/* The SHA-256 of data[0..len) into out. 0, or -EIO if libcrypto fails. */
static int sha256(const void *data, size_t len, uint8_t out[AUTH_KEY_HASH_SIZE])
{
	unsigned int n = 0;
	if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != AUTH_KEY_HASH_SIZE)
		return -EIO;
	return 0;
}

int auth_key_new(char text[AUTH_KEY_TEXT_MAX], struct auth_key *ret, struct error *err)
{
	uint8_t rnd[AUTH_KEY_ID_LEN + AUTH_KEY_SECRET_LEN];
	ssize_t got = getrandom(rnd, sizeof(rnd), 0);
	if (got != (ssize_t)sizeof(rnd))
		return error_set_errno(err, got < 0 ? errno : EIO, "API key: no randomness");

	/* a byte's low five bits are uniform, so each character is */
	char t[AUTH_KEY_TEXT_MAX];
	char *p = t;
	memcpy(p, AUTH_KEY_PREFIX, AUTH_KEY_PREFIX_LEN);
	p += AUTH_KEY_PREFIX_LEN;
	for (size_t i = 0; i < AUTH_KEY_ID_LEN; i++)
		*p++ = base32[rnd[i] & 31];
	*p++ = '_';
	for (size_t i = AUTH_KEY_ID_LEN; i < sizeof(rnd); i++)
		*p++ = base32[rnd[i] & 31];
	*p = '\0';
	explicit_bzero(rnd, sizeof(rnd));

	/* parsing what was made keeps the two forms in step */
	struct auth_key key;
	int r = auth_key_parse(t, &key, err);
	if (r == 0) {
		memcpy(text, t, AUTH_KEY_TEXT_LEN + 1);
		*ret = key;
	}
	explicit_bzero(t, sizeof(t));
	return r;
}

int auth_key_parse(const char *text, struct auth_key *ret, struct error *err)
{
	if (!text || !*text)
		return error_set(err, EINVAL, "API key: none given");
	if (strncmp(text, AUTH_KEY_PREFIX, AUTH_KEY_PREFIX_LEN) != 0)
		return error_set(err, EINVAL, "API key: does not begin with \"%s\"",
				 AUTH_KEY_PREFIX);

	const char *id = text + AUTH_KEY_PREFIX_LEN;
	size_t n = strspn(id, base32);
	if (n < AUTH_KEY_ID_LEN && id[n] != '_' && id[n] != '\0')
		return error_set(
		    err, EINVAL,
		    "API key: the id has a character outside lower-case Crockford base32");
	if (n < AUTH_KEY_ID_LEN)
		return error_set(err, EINVAL, "API key: the id is shorter than %d characters",
				 AUTH_KEY_ID_LEN);
	if (id[AUTH_KEY_ID_LEN] != '_')
		return error_set(err, EINVAL, "API key: no '_' after the id's %d characters",
				 AUTH_KEY_ID_LEN);

	const char *secret = id + AUTH_KEY_ID_LEN + 1;
	size_t m = strspn(secret, base32);
	if (m < AUTH_KEY_SECRET_LEN && secret[m] != '\0')
		return error_set(
		    err, EINVAL,
		    "API key: the secret has a character outside lower-case Crockford base32");
	if (m < AUTH_KEY_SECRET_LEN)
		return error_set(err, EINVAL, "API key: the secret is shorter than %d characters",
				 AUTH_KEY_SECRET_LEN);
	if (secret[AUTH_KEY_SECRET_LEN] != '\0')
		return error_set(err, EINVAL,
				 "API key: something follows the secret's %d characters",
				 AUTH_KEY_SECRET_LEN);

	struct auth_key key;
	memcpy(key.id, id, AUTH_KEY_ID_LEN);
	key.id[AUTH_KEY_ID_LEN] = '\0';
	if (sha256(secret, AUTH_KEY_SECRET_LEN, key.hash) < 0)
		return error_set(err, EIO, "API key: cannot hash the secret");
	*ret = key;
	return 0;
}

int auth_bearer_parse(const char *header, struct auth_key *ret, struct error *err)
{
	if (!header || !*header)
		return error_set(err, EINVAL, "Authorization: none given");
	/* the scheme's case does not matter (RFC 7235 2.1); the one space must be there */
	if (strncasecmp(header, BEARER, BEARER_LEN) != 0)
		return error_set(err, EINVAL, "Authorization: not of the form \"Bearer <key>\"");
	return auth_key_parse(header + BEARER_LEN, ret, err);
}

bool auth_hash_equal(const uint8_t a[AUTH_KEY_HASH_SIZE], const uint8_t b[AUTH_KEY_HASH_SIZE])
{
	return CRYPTO_memcmp(a, b, AUTH_KEY_HASH_SIZE) == 0;
}

void auth_token_hash(const char *token, uint8_t out[AUTH_KEY_HASH_SIZE])
{
	if (sha256(token, strlen(token), out) < 0)
		abort();
}

bool auth_key_id_is_valid(const char *s)
{
	return s && strspn(s, base32) == AUTH_KEY_ID_LEN && s[AUTH_KEY_ID_LEN] == '\0';
}
