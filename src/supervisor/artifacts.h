/*
 * artifacts.h - a task's artifacts: the paths its spec declares
 * ("artifacts": ["/workspace/report.csv", "/workspace/out/"]), copied out
 * of the sandbox when an attempt ends, whatever its end, into the task's
 * directory:
 *
 *   <task>/artifacts/manifest.json   {"attempt":N,"bytes":B,"truncated":T,
 *                                     "entries":[{"path","type","size",
 *                                     "truncated"},...]}
 *   <task>/artifacts/files/<path>    the copies, at their sandbox paths
 *
 * "entries" lists every declared path, in the spec's order, each followed
 * by what a directory holds (depth first, names sorted). type is "file"
 * or "directory" (copied), "missing" (a declared path that is not
 * there), or "symlink", "fifo", "socket", "device", "other" (recorded,
 * never copied, never followed). size is a file's bytes in the sandbox;
 * truncated, that fewer were copied (the byte cap was reached), or, on a
 * directory, that some of it was left out (a cap, or a name that is not
 * UTF-8 text).
 *
 * The sandbox's content is untrusted. It is read from the directory fds
 * init handed over (runtime/sandbox.h: sandbox_take_dirs()) once every
 * process of the sandbox is gone, so nothing changes under the walk; the
 * walk goes one component at a time by fd with O_NOFOLLOW, never through
 * a symlink, never onto another file system, and opens only regular files
 * (O_NONBLOCK: a FIFO never blocks). What it writes is bounded by
 * core/limits.h: TASK_ARTIFACTS_BYTES_MAX bytes of files,
 * TASK_ARTIFACTS_ENTRIES_MAX entries, TASK_ARTIFACTS_DEPTH_MAX levels.
 *
 * The new set is built in <task>/artifacts.new/ and swapped in whole
 * (renameat2 RENAME_EXCHANGE), after a syncfs: the last attempt's
 * artifacts replace the older ones. On a failure (the host's: its disk
 * full) the caller removes LAYOUT_ARTIFACTS_NEW; the older set stays.
 */
#ifndef AGENTBOX_SUPERVISOR_ARTIFACTS_H
#define AGENTBOX_SUPERVISOR_ARTIFACTS_H

#include "base/error.h"

#include <jansson.h>
#include <stdint.h>

/*
 * Copy paths (the spec's "artifacts", a JSON array of the API's checked
 * paths) from work_fd (the workdir, workdir its sandbox path) and tmp_fd
 * (/tmp) into task_dirfd's LAYOUT_ARTIFACTS. A fd of -1 (the sandbox
 * never ran) makes every path under it "missing". 0 or -errno with err.
 */
int artifacts_collect(int task_dirfd, uint32_t attempt, const json_t *paths, const char *workdir,
		      int work_fd, int tmp_fd, struct error *err);

/* Remove name under dirfd and everything beneath it (no symlink followed). 0 or -errno. */
int artifacts_remove_tree(int dirfd, const char *name);

#endif
