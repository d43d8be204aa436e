/*
 * layout.h - the one description of the state directory's layout. Every
 * path agentbox keeps under its state directory is built here, so the
 * writers (the scheduler, the supervisor, the fleet, the shim) and the
 * readers (the API, the streams) cannot drift apart: a reader that looked
 * in another place than its writer wrote to would silently lose what was
 * made durable.
 *
 *   <state>/agentbox.db                     the SQLite store (store.h)
 *   <state>/daemon.lock, token              the daemon's lock; the TCP token
 *   <state>/tasks/<task id>/                one durable task; removed whole
 *                                           with it, after its rows
 *                                           (sched/retain.h)
 *       state.img                           its /state, an ext4 image kept
 *                                           from one attempt to the next
 *                                           (supervisor/state.h; a task
 *                                           older than images: state/)
 *       secrets.json                        the values of its "secrets" (0600;
 *                                           egress/secret.h's private form),
 *                                           for its supervisors, until it ends
 *       artifacts/                          the last ended attempt's artifacts
 *                                           (supervisor/artifacts.h):
 *           manifest.json                   what was copied, and how much
 *           files/<sandbox path>            the copies (regular files, dirs)
 *       artifacts.new/                      the next ones, while being made
 *       inputs/<input id>, .tenant          the inputs its files read, taken
 *                                           from <state>/inputs/ at its create
 *                                           (.tenant: whose), until it ends
 *       attempt-<N>/                        attempt N (supervisor/attempt.h):
 *           attempt.json                    what to run (the scheduler)
 *           lock, supervisor                the supervisor's lock and pid file
 *           events, events.len              accepted progress lines; durable length
 *           output, output.len              stdout+stderr; durable length
 *           result.json                     how it ended; present = ended
 *   <state>/sandboxes/<sandbox id>/         one interactive sandbox
 *       sandbox.json, env.json              its spec; its exec environment
 *       lock, shim, shim.sock               the shim's lock, pid file, socket
 *       secrets.json                        its secrets' values (0600), until
 *                                           its shim has read them
 *       end.json                            how it ended (the shim)
 *       procs/<pid>.out, .err, .json        a command's output and exit record
 *   <state>/inputs/<tenant>/<input id>      an input uploaded (POST /v1/inputs)
 *                                           that no task has named yet; .tmp-*
 *                                           while its body arrives; removed
 *                                           past agentboxd --input-ttl
 *   <state>/images/                         the image store (image/store.h), an
 *                                           OCI image layout:
 *       oci-layout, index.json              the layout's marker; the refs
 *       blobs/sha256/<hex>                  manifests, configs, layers
 *       trees/<config hex>/                 one image unpacked, read-only
 *       tmp/                                imports in progress
 *       lock                                the store's lock
 *
 * Every function writes a NUL-terminated path into buf[0..size) and
 * returns 0, or -ENAMETOOLONG when it does not fit (buf then holds a
 * truncated path that must not be used). ids are checked before they get
 * here (core/id.h): they never hold '/'.
 */
#ifndef AGENTBOX_CORE_LAYOUT_H
#define AGENTBOX_CORE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Names directly under the state directory. */
#define LAYOUT_DB	   "agentbox.db"
#define LAYOUT_DAEMON_LOCK "daemon.lock"
#define LAYOUT_TOKEN	   "token"
#define LAYOUT_TASKS	   "tasks"
#define LAYOUT_SANDBOXES   "sandboxes"

#define LAYOUT_IMAGES "images"

/* Names in the image store's directory (<state>/images). */
#define LAYOUT_IMAGE_OCI_LAYOUT "oci-layout"
#define LAYOUT_IMAGE_INDEX	"index.json"
#define LAYOUT_IMAGE_BLOBS	"blobs"
#define LAYOUT_IMAGE_SHA256	"sha256" /* in blobs/ */
#define LAYOUT_IMAGE_TREES	"trees"
#define LAYOUT_IMAGE_TMP	"tmp"
#define LAYOUT_IMAGE_LOCK	"lock"
/* in trees/: a tree being built, or being removed */
#define LAYOUT_IMAGE_TREE_TEMP_PREFIX ".tmp-"

/* Names in a task's directory. */
#define LAYOUT_TASK_STATE	"state" /* a directory: tasks older than images */
#define LAYOUT_TASK_STATE_IMAGE "state.img"
#define LAYOUT_TASK_STATE_TEMP	"state.img.tmp"
#define LAYOUT_ATTEMPT_PREFIX	"attempt-"

/* Names in an attempt's directory. */
#define LAYOUT_ATTEMPT_JSON   "attempt.json"
#define LAYOUT_LOCK	      "lock"
#define LAYOUT_SUPERVISOR_PID "supervisor"
#define LAYOUT_EVENTS	      "events"
#define LAYOUT_EVENTS_LEN     "events.len"
#define LAYOUT_OUTPUT	      "output"
#define LAYOUT_OUTPUT_LEN     "output.len"
#define LAYOUT_RESULT	      "result.json"
/* an allow-mode sandbox's refused connections and names, JSON lines (network/relay.h) */
#define LAYOUT_NETWORK_LOG "network.jsonl"

/* In a task's directory: its artifacts (supervisor/artifacts.h). */
#define LAYOUT_ARTIFACTS	  "artifacts"
#define LAYOUT_ARTIFACTS_NEW	  "artifacts.new"
#define LAYOUT_ARTIFACTS_MANIFEST "manifest.json"
#define LAYOUT_ARTIFACTS_FILES	  "files"

/* In a task's directory and a sandbox's: secret values, 0600, never in the store. */
#define LAYOUT_SECRETS "secrets.json"
/*
 * inputs/: <state>/inputs/<tenant>/<input id>, uploaded and not yet
 * named by a task (".tmp-*" while one arrives), and
 * <state>/tasks/<id>/inputs/<input id>, those its files read.
 */
#define LAYOUT_INPUTS		 "inputs"
#define LAYOUT_INPUT_TEMP_PREFIX ".tmp-"
/* <state>/egress-ca: the daemon's CA for secrets (network/intercept.h) */
#define LAYOUT_EGRESS_CA "egress-ca"

/* Names in a sandbox's directory (and LAYOUT_LOCK). */
#define LAYOUT_SANDBOX_JSON "sandbox.json"
#define LAYOUT_ENV_JSON	    "env.json"
#define LAYOUT_SHIM_PID	    "shim"
#define LAYOUT_SHIM_SOCK    "shim.sock"
#define LAYOUT_END_JSON	    "end.json"
#define LAYOUT_PROCS	    "procs"

/* The files of one command in procs/: <pid>.<ext>. */
#define LAYOUT_PROC_OUT	 "out"
#define LAYOUT_PROC_ERR	 "err"
#define LAYOUT_PROC_EXIT "json"

/* <state>/<name>: a file directly under the state directory. */
int layout_state_file(char *buf, size_t size, const char *state_dir, const char *name);

/* <state>/images */
int layout_images_dir(char *buf, size_t size, const char *state_dir);

/* <state>/images/trees/<hex>: the tree of the image whose config's digest has hex. */
int layout_image_tree(char *buf, size_t size, const char *state_dir, const char *hex);

/* <state>/tasks/<id> */
int layout_task_dir(char *buf, size_t size, const char *state_dir, const char *id);

/*
 * Remove task id's secret values (<task dir>/LAYOUT_SECRETS: emptied
 * first, so that no other link keeps them) and, with dir_too, the task's
 * directory if that leaves it empty. Best effort: what is not there is
 * no error. The API (a refused or cancelled task) and the scheduler (a
 * task that ended) both call it.
 */
void layout_secrets_forget(const char *state_dir, const char *id, bool dir_too);

/*
 * Remove task id's inputs (<state>/tasks/<id>/inputs/, a flat directory)
 * once no attempt can need them: the task ended. Best effort, no error:
 * the task's removal takes what is left.
 */
void layout_inputs_forget(const char *state_dir, const char *id);

/* "attempt-<N>": an attempt's directory, relative to its task's. */
int layout_attempt_name(char *buf, size_t size, uint32_t attempt);

/* <state>/tasks/<id>/attempt-<N> */
int layout_attempt_dir(char *buf, size_t size, const char *state_dir, const char *id,
		       uint32_t attempt);

/* <state>/tasks/<id>/attempt-<N>/<name>, name one of the attempt names above. */
int layout_attempt_file(char *buf, size_t size, const char *state_dir, const char *id,
			uint32_t attempt, const char *name);

/* <state>/sandboxes/<id> */
int layout_sandbox_dir(char *buf, size_t size, const char *state_dir, const char *id);

/* <state>/sandboxes/<id>/<name>, name one of the sandbox names above. */
int layout_sandbox_file(char *buf, size_t size, const char *state_dir, const char *id,
			const char *name);

/* "procs/<pid>.<ext>": a command's file, relative to its sandbox's directory. */
int layout_proc_name(char *buf, size_t size, long pid, const char *ext);

/* <state>/sandboxes/<id>/procs/<pid>.<ext>, ext one of LAYOUT_PROC_*. */
int layout_proc_file(char *buf, size_t size, const char *state_dir, const char *id, long pid,
		     const char *ext);

#endif
