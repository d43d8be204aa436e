#include "shim/shim-internal.h"

#include "base/fileio.h"
#include "core/layout.h"
#include "supervisor/spec-json.h"
#include "supervisor/supervise.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int dir_load(struct shim *s, struct error *err)
{
	_cleanup_json_ json_t *root = supervise_read_json(s->dirfd, LAYOUT_SANDBOX_JSON, err);
	if (!root)
		return -err->code;
	const char *id = json_string_value(json_object_get(root, "id"));
	json_t *expires = json_object_get(root, "expires_at");
	json_t *spec = json_object_get(root, "spec");
	if (!id || !*id || strlen(id) >= sizeof(s->id))
		return error_set(err, EINVAL, "sandbox.json: id is not a string of 1 to %zu bytes",
				 sizeof(s->id) - 1);
	if (expires && (!json_is_integer(expires) || json_integer_value(expires) < 0))
		return error_set(err, EINVAL, "sandbox.json: expires_at is not a time in ms");
	if (!json_is_object(spec))
		return error_set(err, EINVAL, "sandbox.json: spec is not an object");
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->park = json_is_true(json_object_get(root, "park_network"));
	s->expires_at = expires ? (int64_t)json_integer_value(expires) : 0;

	spec_init(&s->spec);
	spec_json_limits(json_object_get(spec, "limits"), &s->spec);
	s->spec.timeout_ms = 0; /* an interactive sandbox ends by its expiry */
	s->spec.serve = true;
	char self[64], dir[4096];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", s->dirfd);
	ssize_t n = readlink(self, dir, sizeof(dir) - 1);
	if (n <= 0)
		return error_set_errno(err, errno, "the sandbox's directory");
	dir[n] = '\0';
	snprintf(s->network_log, sizeof(s->network_log), "%s/%s", dir, LAYOUT_NETWORK_LOG);
	/* dir is <state>/sandboxes/<id> (core/layout.h): the store is <state>/images */
	char state_dir[4200];
	snprintf(state_dir, sizeof(state_dir), "%s/../..", dir);
	int r = spec_json_image(spec, state_dir, &s->image, &s->spec, err);
	if (r < 0)
		return r;
	/* the secrets' values: opened for the proxy, never read here (the sandbox's init
	 * is cloned from this process), and gone from the disk before it starts */
	char secrets[4200];
	snprintf(secrets, sizeof(secrets), "%s/%s", dir, LAYOUT_SECRETS);
	int secrets_fd = 0;
	r = spec_json_secrets(spec, secrets, true, &secrets_fd, err);
	if (r == 0 &&
	    (r = spec_json_network(json_object_get(spec, "network"),
				   json_object_get(root, "egress"), secrets_fd, s->network_log,
				   &s->net, &s->spec, err)) < 0 &&
	    secrets_fd > 0)
		close(secrets_fd);
	if (r == 0)
		r = spec_json_env(json_object_get(spec, "env"), 0, "sandbox.json: spec.env",
				  &s->spec_env, err);
	for (char **e = s->spec_env; r == 0 && *e; e++)
		if (spec_add_env(&s->spec, *e) < 0)
			r = error_set(err, E2BIG, "sandbox.json: spec.env has too many entries");
	if (r == 0 && !(s->default_env = spec_build_env(&s->spec)))
		r = error_set(err, ENOMEM, "out of memory");
	return r;
}

int dir_write_end(struct shim *s, const char *reason, const char *detail)
{
	_cleanup_json_ json_t *j =
	    json_pack("{s:s, s:o, s:I}", "reason", reason, "detail", json_text(detail), "time",
		      (json_int_t)wall_clock_ms());
	if (!j)
		return -ENOMEM;
	return supervise_write_json(s->dirfd, LAYOUT_END_JSON, j, true);
}
