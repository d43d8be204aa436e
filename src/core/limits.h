/*
 * limits.h - the named limits and defaults of what a sandbox is asked to
 * be, shared by everyone who checks a request before it reaches the
 * runtime: the CLI's `run`, the API's task and sandbox bodies, the
 * supervisor and the shim. The runtime's spec_validate() enforces the
 * same numbers (runtime/spec.h includes this header), so a request the
 * API accepts is a spec the runtime accepts.
 *
 * Plain numbers and strings; no code.
 */
#ifndef AGENTBOX_CORE_LIMITS_H
#define AGENTBOX_CORE_LIMITS_H

/* Named limits on everything a caller controls. */
#define SPEC_MEMORY_MIN	    (4ULL << 20) /* 4 MiB: less cannot start a shell */
#define SPEC_MEMORY_MAX	    (1ULL << 40) /* 1 TiB */
#define SPEC_CPU_MILLI_MIN  10ULL	 /* 0.01 CPU */
#define SPEC_CPU_MILLI_MAX  1024000ULL	 /* 1024 CPUs */
#define SPEC_PIDS_MAX	    1000000ULL
#define SPEC_DISK_MIN	    (1ULL << 20) /* 1 MiB */
#define SPEC_DISK_MAX	    (1ULL << 40)
#define SPEC_STATE_MIN	    (1ULL << 20) /* a task's /state image (supervisor/state.h) */
#define SPEC_STATE_MAX	    (1ULL << 40)
#define SPEC_TIMEOUT_MAX_MS (30ULL * 86400 * 1000) /* 30 days */
#define SPEC_ARGV_MAX	    4096		   /* arguments in the command */
#define SPEC_ENV_MAX	    256			   /* --env entries, a request's env */
/* what agentbox adds to them: AGENTBOX_*, HTTP(S)_PROXY, the CA's, secrets' placeholders */
#define SPEC_ENV_ADDED_MAX 32
#define SPEC_VOLUMES_MAX   32
#define SPEC_PATH_MAX	   1024 /* bytes in any path we are given */
/* ids a sandbox's user namespace maps, 0..SPEC_IDS-1 (runtime/uidrange.h) */
#define SPEC_IDS	     65536u
#define SPEC_ENV_ENTRY_MAX   (32 * 1024)  /* bytes in one KEY=VALUE */
#define SPEC_FILES_MAX	     1024	  /* files placed in the sandbox at start */
#define SPEC_FILES_BYTES_MAX (4ULL << 20) /* their total size, inputs aside */

/*
 * A task's inputs: files uploaded ahead of it (POST /v1/inputs), each
 * named in its "files" by id, kept on the host's disk beside the task and
 * copied into the sandbox by its init at every attempt. Every byte a
 * client can make us keep is bounded here.
 */
#define SPEC_FILE_INPUT_MAX	 (1ULL << 30) /* 1 GiB: one input */
#define TASK_INPUTS_MAX		 16	      /* inputs one task names */
#define TASK_INPUTS_PENDING_MAX	 16	      /* inputs of a tenant not yet in a task */
#define TASK_INPUT_TTL_DEFAULT_S 3600	      /* an input no task took is removed after */

/*
 * A task's artifacts (supervisor/artifacts.h): what the supervisor copies
 * out of the sandbox when an attempt ends, into <task>/artifacts/. Every
 * byte and inode a sandbox can make us write to the host is bounded here.
 */
#define TASK_ARTIFACTS_PATHS_MAX   32		  /* paths a task declares */
#define TASK_ARTIFACTS_BYTES_MAX   (256ULL << 20) /* file bytes copied, per task */
#define TASK_ARTIFACTS_ENTRIES_MAX 4096		  /* files and directories copied */
#define TASK_ARTIFACTS_DEPTH_MAX   32		  /* directories below a declared one */

/* The defaults of `agentbox run`. */
#define SPEC_DEFAULT_MEMORY    (512ULL << 20)
#define SPEC_DEFAULT_CPU_MILLI 1000ULL
#define SPEC_DEFAULT_PIDS      256ULL
#define SPEC_DEFAULT_DISK      (1ULL << 30)
#define SPEC_DEFAULT_STATE     (256ULL << 20)
#define SPEC_DEFAULT_WORKDIR   "/workspace"
#define SPEC_DEFAULT_PATH      "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
#define SPEC_DEFAULT_LANG      "C.UTF-8"

/*
 * The pids all sandboxes together may hold on a host whose pid_max is
 * pid_max: all but a reserve for the host itself of a quarter of pid_max,
 * and at least LIMITS_PIDS_HOST_RESERVE_MIN. The runtime puts it on the
 * sandboxes' parent cgroup; the daemon takes it as the most one sandbox
 * may ask for.
 */
#define LIMITS_PIDS_HOST_RESERVE_MIN 1024
static inline unsigned long long limits_pids_total(unsigned long long pid_max)
{
	unsigned long long reserve = pid_max / 4;
	if (reserve < LIMITS_PIDS_HOST_RESERVE_MIN)
		reserve = LIMITS_PIDS_HOST_RESERVE_MIN;
	return pid_max > reserve ? pid_max - reserve : 1;
}

/* The most pids one sandbox may ask for by default: a quarter of all of them. */
static inline unsigned long long limits_pids_one(unsigned long long pid_max)
{
	unsigned long long n = limits_pids_total(pid_max) / 4;
	return n ? n : 1;
}

/* A terminal's rows, and its columns (exec with "tty"): 1 up to this. */
#define SPEC_TTY_DIM_MAX 4096

#endif
