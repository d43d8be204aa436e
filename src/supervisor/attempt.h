/*
 * attempt.h - the files of one task attempt, as the daemon and the
 * supervisor share them. The layout is the protocol between the two:
 *
 *   <state>/tasks/<task id>/state.img       the task's /state, kept across attempts
 *                                           (supervisor/state.h)
 *   <state>/tasks/<task id>/attempt-<N>/    one attempt (this directory):
 *       attempt.json   written by the daemon before it starts the supervisor:
 *                      {"task_id": ..., "attempt": N, "spec": <the task's spec>}
 *       lock           held (flock) by the supervisor for as long as it lives
 *       supervisor     "<pid> <start time>\n" of the supervisor, once it runs
 *       progress       the FIFO the task writes progress lines to
 *       events, events.len   accepted progress lines (see progress.h), and
 *                      how many bytes of them are durable
 *       output, output.len   stdout and stderr of the task, interleaved
 *       result.json    how the attempt ended; its presence means it ended;
 *                      written once the task's artifacts are in
 *                      <task>/artifacts/ (artifacts.h)
 *       supervisor.log the supervisor's own complaints, if any
 *
 * Every file is created by the supervisor or the daemon, mode 0600, in a
 * 0700 directory: task specs and output may hold secrets.
 */
#ifndef AGENTBOX_SUPERVISOR_ATTEMPT_H
#define AGENTBOX_SUPERVISOR_ATTEMPT_H

#include "base/error.h"
#include "runtime/sandbox.h"
#include "runtime/spec.h"
#include "supervisor/spec-json.h"

#include <jansson.h>

#include <stdint.h>

#define ATTEMPT_OUTPUT_CAP_DEFAULT (16ULL << 20)
#define ATTEMPT_EVENTS_CAP	   (16ULL << 20) /* accepted progress records */
#define ATTEMPT_PROGRESS_TARGET	   "/run/agentbox/progress"
#define ATTEMPT_STATE_TARGET	   "/state"

/* What attempt.json says, parsed into a sandbox spec. Owns its strings. */
struct attempt {
	char task_id[64];
	uint32_t attempt;
	struct spec spec;
	char **argv;		 /* owned, NULL-terminated */
	char **env;		 /* owned "KEY=VALUE", spec.env points at these */
	struct spec_file *files; /* owned */
	/* the task's inputs the files read (load_files()): their fds, owned */
	char input_ids[TASK_INPUTS_MAX][64];
	int input_fds[TASK_INPUTS_MAX];
	size_t ninputs;
	char state_path[1024]; /* host side of /state: its image (state.h) */
	uint64_t state_bytes;  /* limits.state_mb */
	char progress_fifo[1024];
	struct volume volumes[2];
	struct spec_network net; /* the spec's network, if it has one */
	struct spec_image image; /* the spec's image, if it has one: its use held */
	char network_log[1024];	 /* the relay's refusals (allow mode) */
	json_t *artifacts;	 /* the spec's "artifacts" (a reference), or NULL */
};

/*
 * Load dir/attempt.json (dir is absolute) into a, and make the task's
 * /state ready for it (state_prepare(): the image is made before the
 * first attempt). 0 or -errno with err.
 */
int attempt_load(const char *dir, int dirfd, struct attempt *a, struct error *err);

void attempt_release(struct attempt *a);

/* What result.json records beside the sandbox's own result. */
struct attempt_counts {
	uint64_t progress_lines, malformed_progress, oversized_progress, dropped_progress;
	uint64_t output_bytes, output_dropped;
	uint64_t egress_denied;			      /* refusals of its network, as events */
	uint64_t network_bytes_in, network_bytes_out; /* its link's, sampled every tick */
};

/*
 * Write result.json atomically (temporary file, fsync, rename, fsync of
 * the directory): the end of the attempt, durable. error may be NULL.
 */
int attempt_write_result(int dirfd, const struct sandbox_result *res, const char *error,
			 const struct attempt_counts *counts);

#endif
