/*
 * inputs-tar.c - a directory as a tar input (inputs.h):
 *
 *	"files": {"/workspace/data/": {"tar_input": "inp_..."}}
 *
 * is the same task as one {"input"} entry per regular file of the tar, at
 * /workspace/data/<its name>. The tar, uploaded ahead (POST /v1/inputs)
 * and untrusted, is read once with libarchive from its file when the task
 * is created (tar formats only, no compression); its members' bytes are
 * written one after the other into a blob beside it, which the entries
 * point into, so init copies each file from one fd at its offset. The
 * rules of every tar the API takes hold (tar-member.h, and those of
 * "tar_base64", task-request-tar.c): relative canonical names, regular
 * files and directories only (a directory is made as a file's parent; an
 * empty one is not made).
 */
#include "api/api-internal.h"
#include "api/inputs.h"
#include "api/tar-member.h"

#include "api/task-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"
#include "core/limits.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes read from the tar at a time, and copied to the blob through. */
#define TAR_BLOCK (64 * 1024)

/* The refusal of a tar whose member name (or whose whole) is wrong. */
#define BAD_TAR(e, field, ...) api_error_set(e, API_ERR_INVALID_FIELD, field, __VA_ARGS__)

/*
 * One member's data from a into blob, at most max bytes (its declared
 * size); *ret_size its length. 0, or -errno, or -EBADMSG.
 */
static int copy_member(struct archive *a, int blob, char *buf, uint64_t max, uint64_t *ret_size)
{
	uint64_t size = 0;
	for (;;) {
		la_ssize_t n = archive_read_data(a, buf, TAR_BLOCK);
		if (n == 0)
			break;
		if (n < 0 || (uint64_t)n > max - size)
			return -EBADMSG;
		int r = write_all(blob, buf, (size_t)n);
		if (r < 0)
			return r;
		size += (uint64_t)n;
	}
	*ret_size = size;
	return 0;
}

/* The members of the tar a reads, into blob and out. 0, or an error in e. */
static int expand(struct archive *a, int blob, uint64_t tar_size, const char *id, const char *key,
		  const char *field, json_t *out, struct api_error *e)
{
	_cleanup_free_ char *buf = malloc(TAR_BLOCK);
	if (!buf)
		return -ENOMEM;
	uint64_t offset = 0;
	size_t members = 0;
	struct archive_entry *ent;
	const char *name;
	char nbuf[SPEC_PATH_MAX + 1], path[SPEC_PATH_MAX + 2], why[API_TAR_WHY_MAX];
	int h;
	while ((h = api_tar_next_file(a, nbuf, sizeof(nbuf), &ent, &name, why)) == 1) {
		/* a member's bytes are in the tar: one that claims more is refused */
		int64_t declared = archive_entry_size(ent);
		if (declared < 0 || (uint64_t)declared > tar_size - offset)
			return BAD_TAR(e, field, "%s.tar_input: member %s is larger than the tar",
				       field, name);
		if (++members > TASK_REQUEST_FILES_MAX)
			return BAD_TAR(e, field, "%s.tar_input holds more than %d files", field,
				       TASK_REQUEST_FILES_MAX);
		if ((size_t)snprintf(path, sizeof(path), "%s%s", key, name) >= sizeof(path) ||
		    strlen(path) > SPEC_PATH_MAX || json_object_get(out, path))
			return BAD_TAR(e, field,
				       "%s.tar_input: member %s is too long a path or given twice",
				       field, name);
		uint64_t size = 0;
		int r = copy_member(a, blob, buf, (uint64_t)declared, &size);
		if (r == -EBADMSG)
			return BAD_TAR(e, field, "%s.tar_input: member %s is cut short: %s", field,
				       name, archive_error_string(a));
		if (r == -ENOSPC || r == -EDQUOT)
			return api_error_set(e, API_ERR_NO_SPACE, NULL,
					     "the disk of the daemon's inputs is full");
		if (r < 0)
			return api_error_internal(e, -r, "a tar input's files");
		json_t *v = json_pack("{s:s, s:I, s:I}", "input", id, "offset", (json_int_t)offset,
				      "size", (json_int_t)size);
		if (!v || json_object_set_new(out, path, v) < 0)
			return -ENOMEM;
		offset += size;
	}
	if (h == -EINVAL)
		return BAD_TAR(e, field, "%s.tar_input: %s", field, why);
	if (h < 0)
		return BAD_TAR(e, field, "%s.tar_input is not a whole tar: %s", field, why);
	if (fsync(blob) < 0)
		return errno == ENOSPC || errno == EDQUOT
			   ? api_error_set(e, API_ERR_NO_SPACE, NULL,
					   "the disk of the daemon's inputs is full")
			   : api_error_internal(e, errno, "a tar input's files");
	return 0;
}

int api_input_tar_expand(int in, const char *id, const char *key, json_t *out, struct api_error *e)
{
	char field[API_FIELD_MAX], tar[INPUT_ID_SIZE + sizeof(INPUT_TAR_PREFIX)];
	api_field_key(field, "files", key);
	snprintf(tar, sizeof(tar), "%s%s", INPUT_TAR_PREFIX, id);
	_cleanup_close_ int src = openat(in, tar, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (src < 0 || fstat(src, &st) < 0)
		return api_error_internal(e, errno, "a tar input");
	_cleanup_close_ int blob =
	    openat(in, id, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (blob < 0)
		return api_error_internal(e, errno, "a tar input's files");
	struct archive *a = archive_read_new();
	if (!a)
		return -ENOMEM;
	archive_read_support_format_tar(a);
	int r =
	    archive_read_open_fd(a, src, TAR_BLOCK) != ARCHIVE_OK
		? BAD_TAR(e, field, "%s.tar_input is not a tar: %s", field, archive_error_string(a))
		: expand(a, blob, (uint64_t)st.st_size, id, key, field, out, e);
	archive_read_free(a);
	if (r < 0)
		(void)unlinkat(in, id, 0); /* the tar stays, to be given back */
	return r;
}
