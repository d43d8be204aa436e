/* open, rename, unlink: files in the sandbox, resolved by the sandbox itself. */
#include "shim/shim-internal.h"

#include "base/cleanup.h"

#include <errno.h>
#include <string.h>

static const struct {
	const char *name;
	enum sandbox_open_mode mode;
} modes[] = {
    {"read", SANDBOX_OPEN_READ},
    {"write", SANDBOX_OPEN_WRITE},
    {"dir", SANDBOX_OPEN_DIR},
};

int op_open(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	const char *path;
	int r = req_path(req, "path", true, &path, err);
	if (r < 0)
		return r;
	const char *name = json_string_value(json_object_get(req, "mode"));
	size_t i = 0;
	while (name && i < ELEMENTSOF(modes) && strcmp(modes[i].name, name) != 0)
		i++;
	if (!name || i == ELEMENTSOF(modes))
		return error_set(err, EINVAL, "mode: not \"read\", \"write\" or \"dir\"");
	if ((r = shim_need_running(s, err)) < 0)
		return r;
	char temp[SPEC_PATH_MAX + 32] = "";
	_cleanup_close_ int file = -1;
	if ((r = sandbox_open(s->sb, path, modes[i].mode, &file, temp, sizeof(temp), err)) < 0)
		return r;
	bool write = modes[i].mode == SANDBOX_OPEN_WRITE;
	_cleanup_json_ json_t *m = json_pack("{s:s}", "type", "opened");
	if (m && write && json_object_set_new(m, "temp", json_text(temp)) < 0)
		json_decref(TAKE_PTR(m));
	r = m ? conn_send(s, c, m, file) : -ENOMEM;
	if (r < 0 && write) {
		/* no one will write or rename it: leave nothing behind */
		struct error ignored = {0};
		(void)sandbox_unlink(s->sb, temp, &ignored);
	}
	if (r == -ENOMEM)
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

int op_rename(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	const char *from, *to;
	int r;
	if ((r = req_path(req, "from", true, &from, err)) < 0 ||
	    (r = req_path(req, "to", true, &to, err)) < 0 || (r = shim_need_running(s, err)) < 0 ||
	    (r = sandbox_rename(s->sb, from, to, err)) < 0)
		return r;
	return reply_ok(s, c);
}

int op_unlink(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	const char *path;
	int r;
	if ((r = req_path(req, "path", true, &path, err)) < 0 ||
	    (r = shim_need_running(s, err)) < 0 || (r = sandbox_unlink(s->sb, path, err)) < 0)
		return r;
	return reply_ok(s, c);
}
