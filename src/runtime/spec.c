#include "runtime/spec.h"

#include "base/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void spec_init(struct spec *spec)
{
	*spec = (struct spec){
	    .memory_bytes = SPEC_DEFAULT_MEMORY,
	    .cpu_milli = SPEC_DEFAULT_CPU_MILLI,
	    .pids = SPEC_DEFAULT_PIDS,
	    .disk_bytes = SPEC_DEFAULT_DISK,
	    .workdir = SPEC_DEFAULT_WORKDIR,
	    .network = NETWORK_NONE,
	};
}

void spec_release(struct spec *spec)
{
	free(spec->env);
	spec->env = NULL;
	spec->nenv = 0;
	free(spec->volumes);
	spec->volumes = NULL;
	spec->nvolumes = 0;
}

int spec_add_env(struct spec *spec, const char *kv)
{
	if (spec->nenv >= SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX)
		return -E2BIG;
	const char **n = realloc(spec->env, (spec->nenv + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	n[spec->nenv++] = kv;
	spec->env = n;
	return 0;
}

int spec_add_volume(struct spec *spec, char *arg, struct error *err)
{
	if (spec->nvolumes >= SPEC_VOLUMES_MAX)
		return error_set(err, E2BIG, "--volume: more than %d volumes", SPEC_VOLUMES_MAX);
	char *host = arg;
	char *target = strchr(arg, ':');
	if (!target)
		return error_set(err, EINVAL, "--volume '%s': expected HOST_DIR:SANDBOX_DIR[:ro]",
				 arg);
	*target++ = '\0';
	bool ro = false;
	char *mode = strchr(target, ':');
	if (mode) {
		*mode++ = '\0';
		if (strcmp(mode, "ro") == 0)
			ro = true;
		else if (strcmp(mode, "rw") != 0)
			return error_set(err, EINVAL, "--volume: mode '%s' is not ro or rw", mode);
	}
	struct volume *n = realloc(spec->volumes, (spec->nvolumes + 1) * sizeof(*n));
	if (!n)
		return error_set(err, ENOMEM, "--volume: out of memory");
	n[spec->nvolumes++] = (struct volume){.host = host, .target = target, .read_only = ro};
	spec->volumes = n;
	return 0;
}

/*
 * A sandbox path in its one canonical spelling: absolute, bounded, no
 * ".", ".." or empty components (so no "//" and no trailing "/"), not "/"
 * itself. Only then can reserved prefixes be compared as strings.
 */
static int check_sandbox_path(const char *what, const char *p, struct error *err)
{
	if (!p || p[0] != '/')
		return error_set(err, EINVAL, "%s: '%s' is not an absolute path", what, p ? p : "");
	if (strlen(p) >= SPEC_PATH_MAX)
		return error_set(err, ENAMETOOLONG, "%s: path longer than %d bytes", what,
				 SPEC_PATH_MAX);
	if (strcmp(p, "/") == 0)
		return error_set(err, EINVAL, "%s: '/' cannot be used", what);
	for (const char *c = p; *c;) {
		c++; /* the '/' before this component */
		size_t len = strcspn(c, "/");
		if (len == 0)
			return error_set(err, EINVAL, "%s: '%s' has an empty component", what, p);
		if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return error_set(err, EINVAL, "%s: '%s' contains '.' or '..'", what, p);
		c += len;
	}
	return 0;
}

/* The sandbox's own mount points may not be replaced by a volume. */
static bool is_reserved_target(const char *p)
{
	static const char *const reserved[] = {"/proc", "/dev", "/sys",	 "/tmp", "/usr",
					       "/etc",	"/bin", "/sbin", "/lib", "/lib64"};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		size_t len = strlen(reserved[i]);
		if (strncmp(p, reserved[i], len) == 0 && (p[len] == '\0' || p[len] == '/'))
			return true;
	}
	return false;
}

/* A host path: absolute, bounded, existing, and a directory (or, with
 * any_kind, a regular file or a FIFO too: what a volume may be). */
static int check_host_path(const char *what, const char *p, bool any_kind, struct error *err)
{
	struct stat st;
	if (!p || p[0] != '/')
		return error_set(err, EINVAL, "%s: '%s' is not an absolute path", what, p ? p : "");
	if (strlen(p) >= SPEC_PATH_MAX)
		return error_set(err, ENAMETOOLONG, "%s: path longer than %d bytes", what,
				 SPEC_PATH_MAX);
	if (stat(p, &st) < 0)
		return error_set_errno(err, errno, "%s: '%s'", what, p);
	if (S_ISDIR(st.st_mode) || (any_kind && (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode))))
		return 0;
	if (any_kind)
		return error_set(err, EINVAL, "%s: '%s' is not a directory, file or FIFO", what, p);
	return error_set(err, ENOTDIR, "%s: '%s' is not a directory", what, p);
}

/* Is p below dir (a canonical absolute path), as a proper descendant? */
static bool is_below(const char *p, const char *dir)
{
	size_t len = strlen(dir);
	return strncmp(p, dir, len) == 0 && p[len] == '/' && p[len + 1] != '\0';
}

static int check_files(const struct spec *spec, struct error *err)
{
	uint64_t total = 0;
	if (spec->nfiles > SPEC_FILES_MAX)
		return error_set(err, E2BIG, "files: more than %d files", SPEC_FILES_MAX);
	for (size_t i = 0; i < spec->nfiles; i++) {
		const struct spec_file *f = &spec->files[i];
		int r = check_sandbox_path("files", f->path, err);
		if (r < 0)
			return r;
		if (!is_below(f->path, spec->workdir) && !is_below(f->path, "/tmp"))
			return error_set(err, EINVAL, "files: '%s' is not under %s or /tmp",
					 f->path, spec->workdir);
		if (f->from_fd && (f->fd < SPEC_FILE_FD_MIN || f->len > SPEC_FILE_INPUT_MAX))
			return error_set(err, E2BIG,
					 "files: '%s': an input of more than %llu bytes, or its fd "
					 "below %d",
					 f->path, (unsigned long long)SPEC_FILE_INPUT_MAX,
					 SPEC_FILE_FD_MIN);
		total += f->from_fd ? 0 : f->len; /* an input is bounded on its own */
		if (total > SPEC_FILES_BYTES_MAX)
			return error_set(err, E2BIG, "files: more than %llu bytes in all",
					 (unsigned long long)SPEC_FILES_BYTES_MAX);
	}
	return 0;
}

static int check_env(const char *kv, struct error *err)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return error_set(err, EINVAL, "--env '%s': expected KEY=VALUE", kv);
	if (strlen(kv) >= SPEC_ENV_ENTRY_MAX)
		return error_set(err, E2BIG, "--env: entry longer than %d bytes",
				 SPEC_ENV_ENTRY_MAX);
	if (!env_name_is_valid(kv, (size_t)(eq - kv)))
		return error_set(err, EINVAL, "--env '%.*s': not a valid variable name",
				 (int)(eq - kv), kv);
	return 0;
}

void spec_command_ids(const struct spec *spec, uid_t *ret_uid, gid_t *ret_gid)
{
	bool ids = spec->user == SPEC_USER_IDS;
	*ret_uid = ids ? spec->uid : SANDBOX_UID;
	*ret_gid = ids ? spec->gid : SANDBOX_GID;
}

int spec_validate(const struct spec *spec, struct error *err)
{
	int r;
	if (spec->serve && !spec->argv) {
		/* serve mode: no command of its own */
	} else if (!spec->argv || spec->argc == 0 || !spec->argv[0] || !spec->argv[0][0]) {
		return error_set(err, EINVAL, "missing command: give it after --");
	} else if (spec->argc > SPEC_ARGV_MAX) {
		return error_set(err, E2BIG, "command: more than %d arguments", SPEC_ARGV_MAX);
	}
	if (spec->memory_bytes < SPEC_MEMORY_MIN || spec->memory_bytes > SPEC_MEMORY_MAX)
		return error_set(err, ERANGE, "--memory: must be between 4m and 1t");
	if (spec->cpu_milli < SPEC_CPU_MILLI_MIN || spec->cpu_milli > SPEC_CPU_MILLI_MAX)
		return error_set(err, ERANGE, "--cpus: must be between 0.01 and 1024");
	if (spec->pids < 1 || spec->pids > SPEC_PIDS_MAX)
		return error_set(err, ERANGE, "--pids: must be between 1 and %llu",
				 (unsigned long long)SPEC_PIDS_MAX);
	if (spec->disk_bytes < SPEC_DISK_MIN || spec->disk_bytes > SPEC_DISK_MAX)
		return error_set(err, ERANGE, "--disk: must be between 1m and 1t");
	if (spec->timeout_ms > SPEC_TIMEOUT_MAX_MS)
		return error_set(err, ERANGE, "--timeout: longer than 30 days");
	if ((r = check_sandbox_path("--workdir", spec->workdir, err)) < 0)
		return r;
	if (is_reserved_target(spec->workdir))
		return error_set(err, EINVAL, "--workdir: '%s' is reserved by the sandbox",
				 spec->workdir);
	if (spec->cwd && strcmp(spec->cwd, "/") != 0 &&
	    (r = check_sandbox_path("--cwd", spec->cwd, err)) < 0)
		return r;
	if (spec->rootfs && (r = check_host_path("--rootfs", spec->rootfs, false, err)) < 0)
		return r;
	if (spec->image_tree && spec->rootfs)
		return error_set(err, EINVAL, "--image-tree and --rootfs exclude each other");
	if (spec->image_tree &&
	    (r = check_host_path("--image-tree", spec->image_tree, false, err)) < 0)
		return r;
	if (spec->user != SPEC_USER_SANDBOX && spec->user != SPEC_USER_ROOT &&
	    spec->user != SPEC_USER_IDS)
		return error_set(err, EINVAL, "--user: unknown user");
	if (spec->user == SPEC_USER_IDS &&
	    (spec->uid == 0 || spec->uid >= SPEC_IDS || spec->gid >= SPEC_IDS))
		return error_set(err, EINVAL, "user %u:%u: not ids 1..%u:0..%u of the sandbox",
				 (unsigned)spec->uid, (unsigned)spec->gid, SPEC_IDS - 1,
				 SPEC_IDS - 1);
	for (size_t i = 0; i < spec->nenv; i++)
		if ((r = check_env(spec->env[i], err)) < 0)
			return r;
	if ((r = check_files(spec, err)) < 0)
		return r;
	for (size_t i = 0; i < spec->nvolumes; i++) {
		const struct volume *v = &spec->volumes[i];
		if ((r = check_host_path("--volume", v->host, true, err)) < 0)
			return r;
		if ((r = check_sandbox_path("--volume", v->target, err)) < 0)
			return r;
		if (is_reserved_target(v->target))
			return error_set(err, EINVAL, "--volume: '%s' is reserved by the sandbox",
					 v->target);
	}
	return 0;
}

static bool env_has_key(const char *kv, const char *key, size_t keylen)
{
	return strncmp(kv, key, keylen) == 0 && kv[keylen] == '=';
}

char **spec_build_env(const struct spec *spec)
{
	char home[SPEC_PATH_MAX + 8];
	snprintf(home, sizeof(home), "HOME=%s", spec->workdir);
	const char *defaults[] = {"PATH=" SPEC_DEFAULT_PATH, home, "LANG=" SPEC_DEFAULT_LANG};
	size_t ndef = sizeof(defaults) / sizeof(defaults[0]);
	const char *all[SPEC_ENV_MAX + SPEC_ENV_ADDED_MAX + 3];
	size_t n = 0;

	/* Later entries win: walk defaults then caller values, replacing keys. */
	for (size_t i = 0; i < ndef + spec->nenv; i++) {
		const char *kv = i < ndef ? defaults[i] : spec->env[i - ndef];
		size_t keylen = strcspn(kv, "=");
		size_t j;
		for (j = 0; j < n; j++)
			if (env_has_key(all[j], kv, keylen))
				break;
		all[j] = kv;
		if (j == n)
			n++;
	}

	size_t bytes = (n + 1) * sizeof(char *);
	for (size_t i = 0; i < n; i++)
		bytes += strlen(all[i]) + 1;
	char **env = malloc(bytes);
	if (!env)
		return NULL;
	char *p = (char *)(env + n + 1);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(all[i]) + 1;
		memcpy(p, all[i], len);
		env[i] = p;
		p += len;
	}
	env[n] = NULL;
	return env;
}
