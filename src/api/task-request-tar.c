/*
 * task-request-tar.c - a directory in "files" as a tar stream:
 *
 *	"files": {"/workspace/dir/": {"tar_base64": "<a tar, base64>"}}
 *
 * is the same request as one entry per regular file of the tar, at
 * /workspace/dir/<its name>. The tar is untrusted input, read by
 * libarchive from memory (tar formats only: ustar, pax, GNU; no
 * compression): a member's name must be relative and canonical once a
 * leading "./" is dropped (no "..", no empty component), directories are
 * skipped (a file's parents are made for it; an empty directory is not
 * made), and any other member (symlink, hard link, device, FIFO) is
 * refused. The decoded tar counts against TASK_REQUEST_TAR_BYTES_MAX, its
 * files against TASK_REQUEST_FILES_MAX and TASK_REQUEST_FILES_BYTES_MAX.
 */
#include "api/task-request-internal.h"
#include "api/tar-member.h"
#include "base/base64.h"
#include "base/buf.h"
#include "core/limits.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* content as files takes it: text when it is UTF-8 without NUL, else {"base64"}. */
static json_t *content_value(const char *data, size_t len)
{
	if (!memchr(data, '\0', len)) {
		json_t *s = json_stringn(data, len);
		if (s)
			return s;
	}
	struct buf b = {0};
	char *enc = NULL;
	size_t n = 0;
	base64_encode(&b, data, len);
	buf_reserve(&b, 0);
	if (buf_steal(&b, &enc, &n) < 0) {
		buf_release(&b);
		return NULL;
	}
	json_t *v = json_pack("{s:s%}", "base64", enc, n);
	free(enc);
	return v;
}

/* The members of tar[0..len) into out, at dir/<name>. */
static int expand_one(const char *field, const char *dir, const char *tar, size_t len, json_t *out,
		      size_t *total, struct api_error *e)
{
	struct archive *a = archive_read_new();
	if (!a)
		return -ENOMEM;
	int r = 0;
	char *data = NULL;
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, len) != ARCHIVE_OK) {
		r = INVALID(e, field, "%s.tar_base64 is not a tar: %s", field,
			    archive_error_string(a));
		goto out;
	}
	struct archive_entry *ent;
	const char *name;
	char nbuf[SPEC_PATH_MAX + 1], path[SPEC_PATH_MAX + 2], why[API_TAR_WHY_MAX];
	int h;
	while ((h = api_tar_next_file(a, nbuf, sizeof(nbuf), &ent, &name, why)) == 1) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
		    json_object_get(out, path)) {
			r = INVALID(e, field,
				    "%s.tar_base64: member %s is too long a path or given "
				    "twice",
				    field, name);
			goto out;
		}
		int64_t size = archive_entry_size(ent);
		if (json_object_size(out) >= TASK_REQUEST_FILES_MAX || size < 0 ||
		    (uint64_t)size > TASK_REQUEST_FILES_BYTES_MAX - *total) {
			r = INVALID(e, "files",
				    "files hold more than %d entries or %d bytes in all",
				    TASK_REQUEST_FILES_MAX, TASK_REQUEST_FILES_BYTES_MAX);
			goto out;
		}
		free(data);
		data = malloc((size_t)size + 1);
		if (!data) {
			r = -ENOMEM;
			goto out;
		}
		la_ssize_t got = size ? archive_read_data(a, data, (size_t)size) : 0;
		if (got != size) {
			r = INVALID(e, field, "%s.tar_base64: member %s is cut short", field, name);
			goto out;
		}
		*total += (size_t)size;
		json_t *v = content_value(data, (size_t)size);
		if (!v || json_object_set_new(out, path, v) < 0) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (h == -EINVAL)
		r = INVALID(e, field, "%s.tar_base64: %s", field, why);
	else if (h < 0)
		r = INVALID(e, field, "%s.tar_base64 is not a whole tar: %s", field, why);
out:
	free(data);
	archive_read_free(a);
	return r;
}

int task_request_expand_tars(json_t *files, struct api_error *e)
{
	if (!json_is_object(files))
		return 0;
	json_t *out = json_object(), *v;
	const char *key;
	void *tmp;
	size_t total = 0;
	int r = out ? 0 : -ENOMEM;
	json_object_foreach_safe(files, tmp, key, v)
	{
		json_t *t = json_object_get(v, "tar_base64");
		if (r < 0 || !json_is_object(v) || !t)
			continue;
		char field[API_FIELD_MAX], dir[SPEC_PATH_MAX + 1];
		api_field_key(field, "files", key);
		size_t klen = strlen(key);
		if (json_object_size(v) != 1 || !json_is_string(t)) {
			r = INVALID(e, field, "%s must be {\"tar_base64\": \"...\"}", field);
			break;
		}
		if (klen < 2 || key[klen - 1] != '/' || key[klen - 2] == '/' ||
		    klen > SPEC_PATH_MAX) {
			r = INVALID(e, field, "a tar goes to a directory: %s must end in one '/'",
				    field);
			break;
		}
		memcpy(dir, key, klen - 1);
		dir[klen - 1] = '\0';
		size_t n = json_string_length(t);
		if (n / 4 * 3 > TASK_REQUEST_TAR_BYTES_MAX + 2) {
			r = INVALID(e, field, "%s.tar_base64 holds more than %d bytes", field,
				    TASK_REQUEST_TAR_BYTES_MAX);
			break;
		}
		struct buf b = {.max = TASK_REQUEST_TAR_BYTES_MAX};
		r = base64_decode(&b, json_string_value(t), n);
		if (r == -EINVAL)
			r = INVALID(e, field, "%s.tar_base64 is not strict base64", field);
		if (r == -E2BIG)
			r = INVALID(e, field, "%s.tar_base64 holds more than %d bytes", field,
				    TASK_REQUEST_TAR_BYTES_MAX);
		if (r == 0)
			r = expand_one(field, dir, b.data ? b.data : "", b.len, out, &total, e);
		buf_release(&b);
		if (r == 0)
			r = json_object_del(files, key) < 0 ? -ENOMEM : 0;
	}
	/* the tars' files beside the others; a path given twice is refused */
	json_object_foreach(out, key, v)
	{
		if (r < 0)
			break;
		if (json_object_get(files, key)) {
			char field[API_FIELD_MAX];
			api_field_key(field, "files", key);
			r = INVALID(e, field, "%s is given twice (a tar's member too)", field);
		} else if (json_object_set(files, key, v) < 0) {
			r = -ENOMEM;
		}
	}
	json_decref(out);
	return r;
}
