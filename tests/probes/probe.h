/*
 * probe.h - the escape probes run from inside a sandbox.
 *
 * Each probe tries something a sandbox must stop and records what the
 * kernel answered. A probe runs in a throwaway child process (so a crash,
 * a leaked fd or an unshare() cannot disturb the next one) and writes its
 * result into a shared anonymous mapping; the parent prints one line per
 * probe.
 *
 * Calls are made with arguments chosen so that "allowed but harmless" can
 * be told from "denied": a bad fd or pointer makes an allowed call fail
 * with EBADF/EFAULT/EINVAL, while the seccomp filter answers EPERM or
 * ENOSYS before the kernel looks at the arguments.
 *
 * Many probes are dangerous outside a sandbox (mount, kill(-1), ...). Each
 * is written so that, run on a host as root, it either does nothing
 * harmful (it works in a private mount namespace or on a nonexistent
 * target) or refuses to run.
 */
#ifndef AGENTBOX_PROBE_H
#define AGENTBOX_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROBE_OBSERVED_MAX 2048
#define PROBE_LIST_MAX	   32

/* Command-line knobs shared by all probes. */
struct probe_options {
	const char *secret_paths[PROBE_LIST_MAX]; /* --secret-path: must be ENOENT */
	size_t nsecret_paths;
	const char *allow_env[PROBE_LIST_MAX]; /* --allow-env: extra env names */
	size_t nallow_env;
	const char *allow_mounts[PROBE_LIST_MAX]; /* --allow-mount: extra bind targets */
	size_t nallow_mounts;
	uint64_t fill_max;	/* R3/R4: never write more than this */
	const char *plant_name; /* name of planted objects (default agentbox-plant) */
	bool json;
	/*
	 * --as-root CAPS: the sandbox runs its command as root of its user
	 * namespace (agentbox run --user root) with exactly CAPS (hex, as
	 * /proc/self/status shows them); E1 and E2 check that mode instead.
	 */
	bool as_root;
	uint64_t root_caps;
};

extern struct probe_options opt;

/* The result a probe builds; lives in memory shared with the parent. */
struct probe_result {
	char observed[PROBE_OBSERVED_MAX];
	size_t len;
	bool failed;  /* at least one check did not match */
	bool skipped; /* the probe could not run meaningfully here */
	bool done;    /* the probe returned (it did not crash) */
};

struct probe {
	const char *id;
	const char *expect; /* what a correct sandbox answers, in short */
	const char *desc;
	void (*run)(void);
	unsigned flags;
	unsigned timeout_s; /* 0 = the default */
};

enum {
	PROBE_DEFAULT = 1 << 0, /* part of a run without probe ids */
	PROBE_INPROC = 1 << 1,	/* runs in the main process, after all others */
};

/* --- result building (probe.c) --- */

/* Append "token" to observed, comma separated. */
void obs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Append the token, prefixed with '!' and marking the probe failed if !ok. */
void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Mark the probe skipped, with a reason token. */
void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Record "what=ERRNAME" (or "what=allowed" for err 0) and check that the
 * name is one of the '|'-separated names in accept ("EPERM|ENOSYS").
 */
void expect_err(const char *what, int err, const char *accept);

/* As expect_err() for an lstat()/access() result: ENOENT, or "present". */
void expect_absent(const char *what, int err);

/* Symbolic errno name ("EPERM"), "allowed" for 0. */
const char *errname(int err);

/* errno of a raw call: 0 if rc >= 0. */
static inline int err_of(long rc, int saved_errno)
{
	return rc < 0 ? saved_errno : 0;
}
#define ERR(call)                                                                                  \
	({                                                                                         \
		errno = 0;                                                                         \
		long err_rc_ = (long)(call);                                                       \
		err_of(err_rc_, errno);                                                            \
	})

/* --- helpers (probe.c) --- */

/*
 * Run fn(arg) in a forked child and return its result: fn returns an
 * errno value (0 = the call was allowed). If the child was killed by a
 * signal, returns -signo.
 */
int in_child(int (*fn)(void *), void *arg);

/* Read a whole small file into buf (NUL-terminated). Length or -errno. */
long slurp(const char *path, char *buf, size_t size);

/* Value of "Key:\t..." in /proc/<pid>/status text, or NULL. Copies into out. */
const char *status_field(const char *status, const char *key, char *out, size_t size);

/* Number of numeric entries in /proc, or -errno. */
int count_pids(void);

/*
 * True when we are plainly not confined: euid 0 with capabilities; with
 * --as-root, capabilities other than exactly root_caps, or a uid 0 that
 * is the host's (uid_map).
 */
bool privileged_host(void);

/*
 * Try to enter a private mount namespace (unshare + MS_PRIVATE). True if
 * mounts made now cannot leak out of this process.
 */
bool scratch_mountns(void);

/* Build a path in a static buffer: "<dir>/<name>". */
const char *join(const char *dir, const char *name);

/* --- the probes, by area --- */
void probe_F1(void);
void probe_F2(void);
void probe_F3(void);
void probe_F4(void);
void probe_F5(void);
void probe_F6(void);
void probe_F7(void);
void probe_F9(void);
void probe_F10(void);
void probe_E5(void);
void probe_R3(void);
void probe_R4(void);

void probe_P1(void);
void probe_P2(void);
void probe_E1(void);
void probe_E2(void);
void probe_E3(void);
void probe_E4(void);
void probe_R6(void);
void probe_R7(void);
void probe_R10(void);

void probe_K1(void);
void probe_K2(void);
void probe_K3(void);
void probe_K4(void);
void probe_K5(void);
void probe_K6(void);
void probe_K7(void);
void probe_K8(void);
void probe_K9(void);
void probe_K10(void);
void probe_K11(void);

void probe_N1(void);
void probe_N4(void);
void probe_N5(void);
void probe_N6(void);
void probe_X1(void);
void probe_X2(void);

/* Run one probe that is not in the table (the "fill" mode); exit status. */
int run_adhoc(const struct probe *p);

/* Modes other than probes. */
int mode_plant(const char *arg);
int mode_fill(const char *path);

/* Fill dir with one file until the write fails; used by R3/R4 and "fill". */
void fill_dir(const char *dir, uint64_t max, bool cap_by_fs_size);

#endif
