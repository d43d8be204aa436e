/*
 * inputs.h - a task's inputs (inputs.c): files uploaded ahead of a task
 * (POST /v1/inputs, an upload like a sandbox's file), taken into the
 * task's directory when a task names them in "files".
 */
#ifndef AGENTBOX_API_INPUTS_H
#define AGENTBOX_API_INPUTS_H

#include "api/api-internal.h"
#include "core/id.h"

/* The TTL of an input no task took: ctx->input_ttl_s, or its default. */
uint64_t api_input_ttl_s(const struct api_ctx *ctx);

/*
 * POST /v1/inputs, as api_upload_begin() runs it: the caller's tenant
 * may hold one more (else 429 too_many_inputs), and its temporary file
 * is open: *ret_fd (the caller's), its path in temp, the input's new id
 * in id. 0, or an error in c->err.
 */
int api_input_upload_open(struct api_call *c, char *temp, size_t size, int *ret_fd,
			  char id[INPUT_ID_SIZE]);

/*
 * The body is in (size bytes in fd, not closed here): durable, then
 * renamed to its id; *ret the 201. 0, or an error in e (507 no_space).
 * On an error the caller removes temp.
 */
int api_input_upload_finish(int fd, const char *temp, const char *id, uint64_t size,
			    int64_t expires_ms, struct api_response *ret, struct api_error *e);

/*
 * Task task_id takes the inputs its canonical spec's files name (they
 * must be tenant's, not yet taken, and younger than ttl_s at now_ms):
 * each moves into the task's inputs/ (made if need be, with a mark of the
 * tenant's, INPUT_TENANT_FILE, durably, before the first moves), and its
 * entry gets "offset" 0 and "size"; a directory's {"tar_input"} entry
 * becomes its members' (api_input_tar_expand()). *spec_json is replaced
 * by the new text. 0; -EINVAL with e naming the file (no such input, a
 * bad tar), or an internal error; -ENOMEM. On failure every input is its
 * tenant's again.
 */
int api_inputs_take(const char *state_dir, const char *tenant, const char *task_id, int64_t now_ms,
		    uint64_t ttl_s, char **spec_json, struct api_error *e);

/* In a task's inputs/: the tenant whose inputs they were, for a give back at a start. */
#define INPUT_TENANT_FILE ".tenant"

/*
 * A tar input stays in the task's inputs/ as INPUT_TAR_PREFIX<id> until
 * the task is stored (api_inputs_commit() removes it), so that a task
 * refused after api_inputs_take() can give it back whole.
 */
#define INPUT_TAR_PREFIX ".tar-"

/*
 * A tar input (inputs-tar.c): in (the task's inputs/, read-write) holds
 * it as INPUT_TAR_PREFIX<id>. Every regular member's bytes go, one after
 * the other, into a new file <id> there (synced), and out gets one entry
 * per member, key (a directory's, ending in '/') joined with its name:
 * {"input": id, "offset": O, "size": N}. The tar is untrusted: its
 * names are checked as any tar's (tar-member.h), a member that is not a
 * regular file or a directory is refused, as are more than
 * TASK_REQUEST_FILES_MAX members. 0; -EINVAL with e naming key's entry
 * (507 no_space for a full disk, 500 otherwise); -ENOMEM.
 */
int api_input_tar_expand(int in, const char *id, const char *key, json_t *out, struct api_error *e);

/* The task is stored: the tars its inputs were made from go. */
void api_inputs_commit(const char *state_dir, const char *task_id);

/*
 * Everything task_id's inputs/ holds back to tenant's (a tar whole, its
 * blob removed), durably, and inputs/ removed: the task was not stored.
 */
void api_inputs_give_back(const char *state_dir, const char *tenant, const char *task_id);

#endif
