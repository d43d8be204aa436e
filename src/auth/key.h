/*
 * key.h - API keys: their text form, their making, strict parsing, and
 * the hash the store keeps instead of the secret.
 *
 *	abx_<id>_<secret>
 *	abx_0123456789ab_<52 characters>
 *
 * AUTH_KEY_PREFIX is there so that secret scanners find keys that leak.
 * <id> is AUTH_KEY_ID_LEN characters of lower-case Crockford base32 (the
 * alphabet of core/id.h: no i, l, o, u), 60 random bits: public, it finds
 * the key in the store and may appear in URLs and logs. <secret> is
 * AUTH_KEY_SECRET_LEN characters of the same alphabet, 260 random bits
 * (at least AUTH_KEY_SECRET_BYTES bytes' worth): it is shown once, when
 * the key is made, and never kept.
 *
 * What is kept is struct auth_key: the id and the SHA-256 of the secret's
 * characters. A presented key is parsed, its id looked up, and its hash
 * compared with auth_hash_equal(), which takes the same time wherever the
 * two differ.
 *
 * Parsing is strict: one text is one key, with nothing around it (no
 * white space, no upper case). No error message ever quotes the text it
 * refuses, since any part of it may be a secret.
 *
 * Not pure: auth_key_new() draws from getrandom(), and hashing is
 * libcrypto's.
 */
#ifndef AGENTBOX_AUTH_KEY_H
#define AGENTBOX_AUTH_KEY_H

#include "base/error.h"

#include <stdbool.h>
#include <stdint.h>

#define AUTH_KEY_PREFIX	      "abx_"
#define AUTH_KEY_PREFIX_LEN   (sizeof(AUTH_KEY_PREFIX) - 1)
#define AUTH_KEY_ID_LEN	      12		    /* characters of an id: 60 bits */
#define AUTH_KEY_ID_SIZE      (AUTH_KEY_ID_LEN + 1) /* with its NUL */
#define AUTH_KEY_SECRET_BYTES 32		    /* the least randomness of a secret, in bytes */
#define AUTH_KEY_SECRET_LEN   52		    /* characters of a secret: 260 bits */
#define AUTH_KEY_TEXT_LEN     (AUTH_KEY_PREFIX_LEN + AUTH_KEY_ID_LEN + 1 + AUTH_KEY_SECRET_LEN)
#define AUTH_KEY_TEXT_MAX     96 /* a buffer for a key's text and its NUL, with room */
#define AUTH_KEY_HASH_SIZE    32 /* bytes of a SHA-256 */

_Static_assert(AUTH_KEY_SECRET_LEN * 5 >= AUTH_KEY_SECRET_BYTES * 8,
	       "a secret carries at least AUTH_KEY_SECRET_BYTES of randomness");
_Static_assert(AUTH_KEY_TEXT_LEN < AUTH_KEY_TEXT_MAX, "a key's text fits AUTH_KEY_TEXT_MAX");

/* What the store keeps of a key: never its secret. */
struct auth_key {
	char id[AUTH_KEY_ID_SIZE];	  /* NUL-terminated, public */
	uint8_t hash[AUTH_KEY_HASH_SIZE]; /* SHA-256 of the secret's characters */
};

/*
 * Make a fresh random key: its whole text, NUL-terminated, into text (the
 * caller shows it to the user once, then wipes it), and its id and hash
 * into *ret. 0; the -errno of getrandom() (-EIO for a short read); -EIO
 * if hashing fails. Neither output is written on failure.
 */
int auth_key_new(char text[AUTH_KEY_TEXT_MAX], struct auth_key *ret, struct error *err);

/*
 * Parse text, a key's whole text, strictly: AUTH_KEY_PREFIX, exactly
 * AUTH_KEY_ID_LEN id characters, '_', exactly AUTH_KEY_SECRET_LEN secret
 * characters, nothing after. 0 with the id and the hash of the secret in
 * *ret; -EINVAL (text NULL too) with err saying in words what is wrong,
 * never quoting text; -EIO if hashing fails. text is only read.
 */
int auth_key_parse(const char *text, struct auth_key *ret, struct error *err);

/*
 * Parse header, the value of an HTTP Authorization header: "Bearer", one
 * space, then a key's text as auth_key_parse() takes it. The scheme's
 * case does not matter ("bearer" too: RFC 7235 2.1); the space and the
 * key are exact, so extra white space anywhere is refused. 0 with *ret
 * as auth_key_parse() fills it; -EINVAL (header NULL too) with err in
 * words, never quoting header; -EIO if hashing fails.
 *
 * A text after "Bearer " that is not of the abx_ form (an older state
 * directory's single token) is refused here: the caller that still
 * accepts one hashes the text itself with auth_token_hash().
 */
int auth_bearer_parse(const char *header, struct auth_key *ret, struct error *err);

/* Are a and b the same hash? Takes the same time wherever they differ. */
bool auth_hash_equal(const uint8_t a[AUTH_KEY_HASH_SIZE], const uint8_t b[AUTH_KEY_HASH_SIZE]);

/*
 * The SHA-256 of a whole token's text (NUL-terminated, its NUL not
 * hashed) into out: for the single token of older state directories,
 * which is not of the abx_ form and is kept as a legacy admin key. Cannot
 * fail: libcrypto failing to hash (it could not allocate) aborts, since a
 * check of a token must never go on with a made-up hash.
 */
void auth_token_hash(const char *token, uint8_t out[AUTH_KEY_HASH_SIZE]);

/* Is s exactly AUTH_KEY_ID_LEN characters of the alphabet? (NULL: no.) */
bool auth_key_id_is_valid(const char *s);

#endif
