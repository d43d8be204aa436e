/* layout.c - the state directory's paths (layout.h). */
#include "core/layout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4))) static int path(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int layout_state_file(char *buf, size_t size, const char *state_dir, const char *name)
{
	return path(buf, size, "%s/%s", state_dir, name);
}

int layout_images_dir(char *buf, size_t size, const char *state_dir)
{
	return path(buf, size, "%s/" LAYOUT_IMAGES, state_dir);
}

int layout_image_tree(char *buf, size_t size, const char *state_dir, const char *hex)
{
	return path(buf, size, "%s/" LAYOUT_IMAGES "/" LAYOUT_IMAGE_TREES "/%s", state_dir, hex);
}

int layout_task_dir(char *buf, size_t size, const char *state_dir, const char *id)
{
	return path(buf, size, "%s/" LAYOUT_TASKS "/%s", state_dir, id);
}

void layout_secrets_forget(const char *state_dir, const char *id, bool dir_too)
{
	char dir[PATH_MAX], file[PATH_MAX + sizeof(LAYOUT_SECRETS)];
	if (layout_task_dir(dir, sizeof(dir), state_dir, id) < 0)
		return;
	snprintf(file, sizeof(file), "%s/%s", dir, LAYOUT_SECRETS);
	(void)truncate(file, 0);
	(void)unlink(file);
	if (dir_too)
		(void)rmdir(dir);
}

void layout_inputs_forget(const char *state_dir, const char *id)
{
	char dir[PATH_MAX];
	if (path(dir, sizeof(dir), "%s/" LAYOUT_TASKS "/%s/" LAYOUT_INPUTS, state_dir, id) < 0)
		return;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (struct dirent *de; (de = readdir(d));)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	(void)rmdir(dir);
}

int layout_attempt_name(char *buf, size_t size, uint32_t attempt)
{
	return path(buf, size, LAYOUT_ATTEMPT_PREFIX "%" PRIu32, attempt);
}

int layout_attempt_dir(char *buf, size_t size, const char *state_dir, const char *id,
		       uint32_t attempt)
{
	return path(buf, size, "%s/" LAYOUT_TASKS "/%s/" LAYOUT_ATTEMPT_PREFIX "%" PRIu32,
		    state_dir, id, attempt);
}

int layout_attempt_file(char *buf, size_t size, const char *state_dir, const char *id,
			uint32_t attempt, const char *name)
{
	return path(buf, size, "%s/" LAYOUT_TASKS "/%s/" LAYOUT_ATTEMPT_PREFIX "%" PRIu32 "/%s",
		    state_dir, id, attempt, name);
}

int layout_sandbox_dir(char *buf, size_t size, const char *state_dir, const char *id)
{
	return path(buf, size, "%s/" LAYOUT_SANDBOXES "/%s", state_dir, id);
}

int layout_sandbox_file(char *buf, size_t size, const char *state_dir, const char *id,
			const char *name)
{
	return path(buf, size, "%s/" LAYOUT_SANDBOXES "/%s/%s", state_dir, id, name);
}

int layout_proc_name(char *buf, size_t size, long pid, const char *ext)
{
	return path(buf, size, LAYOUT_PROCS "/%ld.%s", pid, ext);
}

int layout_proc_file(char *buf, size_t size, const char *state_dir, const char *id, long pid,
		     const char *ext)
{
	return path(buf, size, "%s/" LAYOUT_SANDBOXES "/%s/" LAYOUT_PROCS "/%ld.%s", state_dir, id,
		    pid, ext);
}
