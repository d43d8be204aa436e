/*
 * sandbox-internal.h - what the files of the /v1/sandboxes routes share
 * (sandbox-routes.c, sandbox-exec.c, sandbox-files.c). Each handler
 * either fills resp (sent by the dispatch) or sends its own response and
 * returns the MHD result.
 */
#ifndef AGENTBOX_DAEMON_SANDBOX_INTERNAL_H
#define AGENTBOX_DAEMON_SANDBOX_INTERNAL_H

#include "daemon/sandbox-routes.h"

#include <jansson.h>

/* Bytes of each stream an exec response carries; the rest stays in the files. */
#define EXEC_RESPONSE_OUTPUT_MAX (1024 * 1024)
/* Entries a directory listing shows at most. */
#define LIST_ENTRIES_MAX 10000

/* resp = status with v as its body (takes v; NULL = out of memory: 500). */
void sandbox_respond_json(struct api_response *resp, int status, json_t *v);

/*
 * The API's exit object of process pid from the shim's exit record (or
 * NULL: still running): pid, exit_code, signal, oom_killed, timed_out,
 * duration_ms, truncated. NULL when out of memory.
 */
json_t *sandbox_exit_json(long pid, json_t *exit);

enum MHD_Result sandbox_exec(struct daemon *d, struct MHD_Connection *c, struct store *st,
			     const struct api_sandbox_call *call, const struct api_request *req,
			     struct api_response *resp);
void sandbox_processes(struct daemon *d, const struct api_sandbox_call *call,
		       struct api_response *resp);
enum MHD_Result sandbox_process_output(struct daemon *d, struct MHD_Connection *c,
				       const struct api_sandbox_call *call,
				       struct api_response *resp);
void sandbox_process_kill(struct daemon *d, const struct api_sandbox_call *call,
			  const struct api_request *req, struct api_response *resp);

enum MHD_Result sandbox_files_get(struct daemon *d, struct MHD_Connection *c,
				  const struct api_sandbox_call *call, struct api_response *resp);
void sandbox_files_delete(struct daemon *d, const struct api_sandbox_call *call,
			  struct api_response *resp);

#endif
