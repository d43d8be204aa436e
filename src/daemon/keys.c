/*
 * keys.c - agentboxd's own dealings with API keys: the token of an older
 * state directory kept as the legacy admin key, and --print-token.
 */
#include "daemon/daemon.h"

#include "auth/key.h"
#include "base/fileio.h"
#include "core/layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TOKEN_TEXT_MAX 128 /* bytes of an older state directory's token (64 hex) */

int daemon_adopt_token(const char *state_dir, struct store *st, struct error *err)
{
	char path[4200], token[TOKEN_TEXT_MAX + 1];
	if (layout_state_file(path, sizeof(path), state_dir, LAYOUT_TOKEN) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	ssize_t n = read_file_at(AT_FDCWD, path, token, sizeof(token));
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return error_set_errno(err, (int)-n, "%s", path);
	token[strcspn(token, "\n")] = '\0';
	/* an older agentboxd wrote 64 hex digits; anything else is kept as it is, unread */
	size_t len = strlen(token);
	if ((size_t)n >= sizeof(token) || len < 32 || strspn(token, "0123456789abcdef") != len)
		return error_set(
		    err, EINVAL,
		    "%s is not an older agentboxd's token (64 hex digits): move it away", path);
	struct key_record k = {.tenant = TENANT_DEFAULT,
			       .role = KEY_ROLE_ADMIN,
			       .created_at = wall_clock_ms(),
			       .label =
				   (char *)"the token of agentboxd --print-token before API keys"};
	snprintf(k.id, sizeof(k.id), "%s", API_LEGACY_KEY_ID);
	auth_token_hash(token, k.hash);
	explicit_bzero(token, sizeof(token));
	int r = store_key_insert(st, &k, err);
	if (r == -EEXIST) {
		/* adopted before: the same token, or another's file put back */
		struct key_record had = {0};
		if ((r = store_key_get(st, API_LEGACY_KEY_ID, &had, err)) == 0 &&
		    !auth_hash_equal(had.hash, k.hash))
			r = error_set(err, EEXIST,
				      "%s holds a token other than the one adopted as key %s: "
				      "move it away",
				      path, API_LEGACY_KEY_ID);
		key_record_release(&had);
	}
	if (r < 0)
		return r;
	/* the store has its hash now: the token's text goes from the disk */
	if (unlink(path) < 0)
		return error_set_errno(err, errno, "%s", path);
	return 0;
}

int daemon_print_key(const char *state_dir, struct error *err)
{
	char db[4200];
	if (layout_state_file(db, sizeof(db), state_dir, LAYOUT_DB) < 0)
		return error_set(err, ENAMETOOLONG, "the state directory's path is too long");
	struct store *st = NULL;
	int r = store_open_sqlite(db, &st, err);
	if (r == 0)
		r = daemon_adopt_token(state_dir, st, err);
	char text[AUTH_KEY_TEXT_MAX];
	struct auth_key key;
	if (r == 0)
		r = auth_key_new(text, &key, err);
	char label[64];
	snprintf(label, sizeof(label), "agentboxd --print-token at %lld",
		 (long long)wall_clock_ms());
	if (r == 0) {
		struct key_record k = {.tenant = TENANT_DEFAULT,
				       .role = KEY_ROLE_ADMIN,
				       .created_at = wall_clock_ms(),
				       .label = label};
		memcpy(k.id, key.id, sizeof(k.id));
		memcpy(k.hash, key.hash, sizeof(k.hash));
		r = store_key_insert(st, &k, err);
	}
	store_close(st);
	if (r == 0) {
		printf("%s\n", text);
		fprintf(stderr,
			"agentboxd: a new admin key %s of the tenant %s: shown this once; each "
			"--print-token makes another (agentbox key ls, agentbox key revoke)\n",
			key.id, TENANT_DEFAULT);
	}
	explicit_bzero(text, sizeof(text));
	return r;
}
