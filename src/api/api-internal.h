/*
 * api-internal.h - what the files of src/api share: one handler call,
 * the parsed query string, rendering, and error responses.
 *
 * A handler gets a struct api_call with the route's checks done (auth,
 * method, body size, content type, a well-formed {id}, known query
 * parameters) and either fills c->res and returns 0, or returns -EINVAL
 * with c->err set (api_error_set()), -EIO with an internal error set, or
 * -ENOMEM. api_handle() turns the last three into error responses.
 */
#ifndef AGENTBOX_API_API_INTERNAL_H
#define AGENTBOX_API_API_INTERNAL_H

#include "api/api.h"
#include "api/errors.h"
#include "api/json-util.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/fileio.h"

#define API_JSON "application/json"
#define API_TEXT "text/plain; charset=utf-8"

/* ---- query strings (query.c) ------------------------------------------ */

#define API_QUERY_PARAMS_MAX 16

struct api_query {
	size_t n;
	struct {
		const char *name; /* decoded, NUL-terminated; point into storage */
		const char *value;
	} v[API_QUERY_PARAMS_MAX];
	char *storage;
};

/*
 * Split and percent-decode query ("a=1&b=x%20y"; '+' is a space). Names
 * must be in allowed (NULL-terminated; NULL = none allowed): others are
 * unknown_field, a repeated name or a value holding NUL is invalid_field.
 * 0, -EINVAL with e set, or -ENOMEM.
 */
int api_query_parse(const char *query, const char *const *allowed, struct api_query *ret,
		    struct api_error *e);
/* Percent-decode s in place ('+' is a space); false on a bad escape or a decoded NUL. */
bool api_percent_decode(char *s);
/*
 * Split the query string s (modified in place) at '&' and '=' and call
 * each(name, value, data, e) with both decoded, in order; a part without
 * '=' has an empty value. A bad escape or an empty name is invalid_field
 * "query". Stops at, and returns, each's first negative return; else 0.
 */
int api_query_each(char *s,
		   int (*each)(const char *name, const char *value, void *data,
			       struct api_error *e),
		   void *data, struct api_error *e);
/* The value of name, or NULL. */
const char *api_query_get(const struct api_query *q, const char *name);
void api_query_release(struct api_query *q);

/* A query integer in [min, max], default def when absent. */
int api_query_int(const struct api_query *q, const char *name, int64_t min, int64_t max,
		  int64_t def, int64_t *ret, struct api_error *e);

/* ---- one call ---------------------------------------------------------- */

/* Why a request was refused a principal (401), for the audit log (auth.c). */
struct api_refusal {
	const char *reason;	  /* static: "no_key", "malformed_key", "unknown_key",
				   * "revoked_key", "expired_key", "unknown_user"; NULL: none */
	char key_id[KEY_ID_SIZE]; /* a revoked or expired key's id (its secret was right); "" */
};

/* api_authenticate(), saying in *why (when not NULL) why it refused. */
int api_authenticate_why(struct api_ctx *ctx, const struct api_request *req, int64_t now,
			 struct api_principal *ret, struct api_error *e, struct api_refusal *why);

struct api_call {
	struct api_ctx *ctx;
	const struct api_request *req;
	const struct api_match *match;
	const struct api_query *query;
	char id[TASK_ID_SIZE];	     /* the path's {id}, well-formed; "" on routes without one */
	char name[TENANT_NAME_SIZE]; /* a tenant's or key's route: its name or id, well-formed */
	long pid;		     /* the path's {pid}, or -1 */
	char ref[IMAGE_REF_MAX];     /* an image's route: its {ref}, well-formed; "" */
	struct api_principal who;    /* who asks (auth.c); zero on a public route */
	bool authenticated;	     /* who is filled: auth passed */
	struct api_refusal refusal;  /* auth refused: why (401) */
	int64_t now;		     /* ms since the epoch, read once per call */
	struct api_response *res;
	struct api_error *err;
};

/*
 * Quotas (quotas.c). api_quotas_effective: defaults (NULL: none) with a
 * tenant's stored quotas over them. api_quotas_merge: a PATCH's "quotas"
 * checked and merged into the stored object, into *ret_json (free()); 0,
 * or -EINVAL with e naming the field, or -ENOMEM. api_put_quotas: q as
 * the API shows it. api_call_limits: tenant's quotas now, or 500.
 * api_quota_refuse: 429 quota_exceeded naming quota id, its limit, the
 * use and what was asked.
 */
void api_quotas_effective(const struct quota *defaults, const char *stored_json, struct quota *ret);
int api_quotas_merge(const char *stored_json, json_t *patch, char **ret_json, struct api_error *e);
void api_put_quotas(struct buf *b, const struct quota *q, bool skip_timeout);
int api_call_limits(struct api_call *c, const char *tenant, struct quota *ret);
int api_quota_refuse(struct api_call *c, enum quota_id id, const struct quota *limit,
		     const struct quota *use, const struct quota *ask);

/* The handlers of the route table (router.c): one per route. */
int api_healthz(struct api_call *c);
int api_tenants_list(struct api_call *c); /* tenants.c */
int api_tenants_create(struct api_call *c);
int api_tenant_get(struct api_call *c);
int api_tenant_delete(struct api_call *c);
int api_tenant_set(struct api_call *c);
int api_keys_list(struct api_call *c);
int api_keys_create(struct api_call *c);
int api_key_revoke(struct api_call *c);
int api_me(struct api_call *c);

/*
 * Tenancy (auth.c). api_may_see: may the caller see what belongs to
 * tenant (an admin sees all; a member, its own)? Where it may not, a
 * handler answers exactly as for an id that does not exist. api_list_
 * tenant: the tenant a list is of, into *ret (a member: its own, whatever
 * it asked for; an admin: the ?tenant= asked for, or NULL for all); 0 or
 * -EINVAL (400 naming "tenant").
 */
bool api_may_see(const struct api_call *c, const char *tenant);
/*
 * The route's {id} (a task, or with sandbox a sandbox): 0 when the caller
 * may see it (an admin: always); for a member, 404 "no task ID" for
 * another tenant's, an unknown one or a pooled sandbox alike, before any
 * of the request is checked. api_prepare() calls it for every route with
 * an id, so every route, its streams included, keeps the rule.
 */
int api_check_owner(struct api_call *c, bool sandbox);
int api_list_tenant(const struct api_call *c, const char **ret);

/* The longest a key may be made to live (POST /v1/keys "expires_in_s"): ten years. */
#define API_KEY_EXPIRES_MAX_S (10LL * 365 * 24 * 3600)
int api_tasks_list(struct api_call *c);
int api_tasks_create(struct api_call *c);
int api_task_get(struct api_call *c);
int api_task_cancel(struct api_call *c);
int api_task_delete(struct api_call *c);
int api_task_events(struct api_call *c);
int api_task_logs(struct api_call *c);
int api_task_artifacts(struct api_call *c); /* artifacts.c */
int api_task_artifact(struct api_call *c);
int api_sandboxes_list(struct api_call *c); /* sandboxes.c */
int api_sandboxes_create(struct api_call *c);
int api_sandbox_get(struct api_call *c);
int api_sandbox_delete(struct api_call *c);
int api_sandbox_timeout(struct api_call *c);
int api_sandbox_pause(struct api_call *c);    /* and resume */
int api_sandbox_exec(struct api_call *c);     /* sandbox-exec.c */
int api_sandbox_exec_get(struct api_call *c); /* a terminal's GET (terminal-get.h) */
int api_sandbox_processes(struct api_call *c);
/* The most refusals GET .../network lists: the newest. */
#define API_NETWORK_DENIED_MAX 1000
int api_sandbox_network(struct api_call *c);
int api_process_output(struct api_call *c);
int api_process_kill(struct api_call *c);
int api_files_get(struct api_call *c);	   /* sandbox-files.c */
int api_files_put(struct api_call *c);	   /* never: api_upload_begin() serves it */
int api_inputs_create(struct api_call *c); /* never: api_upload_begin() serves it */
int api_files_delete(struct api_call *c);

/* ---- images (images.c) ------------------------------------------------------ */

int api_images_list(struct api_call *c);
int api_images_import(struct api_call *c); /* never: api_upload_begin() serves it */
int api_images_prune(struct api_call *c);
/* A store's failure r as the API says it: not_found, image_in_use, invalid_image, ... */
int api_image_error(struct api_error *e, int r, const struct error *err);
/* An image as the API shows it (docs/api.md); NULL = ENOMEM. */
json_t *api_image_json(const struct image_info *i);
/* POST /v1/sandboxes/{id}/commit (sandbox-commit.c) */
int api_sandbox_commit(struct api_call *c);
/*
 * A pull's failure (image/pull.h) as an API error: the registry has no
 * such image (missing, naming field: 404 not_found for the pull route,
 * 400 invalid_field "image" for a create's "pull"), the registry failed
 * (502 registry_error), or the import refused it. -EINVAL or -EIO.
 */
int api_image_pull_error(struct api_error *e, int r, const struct error *err,
			 enum api_error_code missing, const char *field);
/* POST /v1/images/bootstrap: debootstrap in the request's thread (minutes). */
int api_images_bootstrap(struct api_call *c);
int api_image_get(struct api_call *c);
int api_image_delete(struct api_call *c);
int api_images_pull(struct api_call *c); /* pull.h, in the request's thread */
/* GET /v1/images/{ref}/export: the image as an OCI layout tar, a file answer. */
int api_image_export(struct api_call *c);
/* The largest archive an import takes (api_ctx.image_import_max, or IMAGE_IMPORT_MAX). */
uint64_t api_image_import_max(const struct api_ctx *ctx);
/*
 * An import's upload begins: its ?name= checked (normalized into name),
 * a temporary file of the store made (path, *ret_fd). 0, or an API error.
 */
int api_image_upload_open(struct api_call *c, char *path, size_t size, int *ret_fd, char *name,
			  size_t name_size);
/*
 * The archive at path is whole: import it (name "" = the archive's own),
 * remove the file, answer 201 with the image into *ret, or an API error in e.
 */
int api_image_upload_finish(struct image_store *s, const char *path, const char *name,
			    struct api_response *ret, struct api_error *e);

/* ---- the audit log (audit.c) --------------------------------------------- */

/* Fill *ret from call c (with its match m, NULL when it never matched). */
void api_audit_note(const struct api_call *c, const struct api_match *m,
		    struct api_audit_entry *ret);

/*
 * Record entry a, answered res->status with error code (API_ERR_COUNT:
 * none), in st. Never changes the answer: a row the store refuses is
 * said in res->audit, for the server's log. Does nothing unless a->wanted.
 */
void api_audit_record(const struct api_audit_entry *a, enum api_error_code code, struct store *st,
		      struct api_response *res);

/* GET /v1/audit (admins only). */
int api_audit_list(struct api_call *c);

/* Every check before a handler runs; fills c->id, c->pid and *q (router.c). */
int api_prepare(struct api_call *c, struct api_match *m, struct api_query *q);

/*
 * Run handler (with data) as api_handle() runs a route's: every check of
 * api_prepare() first; *ret always filled (status 0 when the handler
 * answered nothing); then the request's audit row (audit.c). 0 or -ENOMEM.
 */
int api_run(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret,
	    int (*handler)(struct api_call *c, void *data), void *data);

/*
 * As api_run(), but the request's audit row is left to the caller: its
 * entry in *ret_note, the error code answered (API_ERR_COUNT: none) in
 * *ret_code, for api_audit_record() once the answer is final (an upload's,
 * at its end).
 */
int api_run_deferred(struct api_ctx *ctx, const struct api_request *req, struct api_response *ret,
		     int (*handler)(struct api_call *c, void *data), void *data,
		     struct api_audit_entry *ret_note, enum api_error_code *ret_code);

/* Turn r (< 0) and e into an error response in ret. 0 or -ENOMEM. */
int api_fail(int r, struct api_error *e, struct api_response *ret);

/* The query parameters each route takes (router.c). */
extern const char *const *const api_route_params[API_ROUTE_COUNT];

/*
 * Make c->res a new response of kind (one the server serves, api.h) with
 * status and content_type; the caller fills the kind's members. Returns it.
 */
struct api_response *api_respond_kind(struct api_call *c, int status, const char *content_type,
				      enum api_response_kind kind);

/* Set res to status with b's text as a JSON body; takes b's buffer. */
int api_respond(struct api_call *c, int status, const char *content_type, struct buf *b);

/* A failed store call r (with se) as an API error: -ENOENT is not_found. */
int api_store_error(struct api_call *c, int r, const struct error *se);

/*
 * The limits a request asks for, against what this host allows
 * (ctx->host; a task's /state counts as disk): 0, or -EINVAL with
 * invalid_field naming the first over. state_bytes 0 = none (a sandbox).
 */
/*
 * May a task or sandbox of network mode (enum egress_mode) be made? none
 * always; open and allow once the daemon's network_ready hook has readied
 * the host (503 network_unavailable when it cannot).
 */
int api_check_network(struct api_call *c, int mode);
/* 503 network_unavailable, naming "secrets", when has_secrets and the CA cannot be readied. */
int api_check_secrets(struct api_call *c, bool has_secrets);

/*
 * A task's secret values (egress/secret.h's private form, json) into
 * <state>/tasks/<id>/secrets.json, durable, before the task is stored
 * (secrets.c). 0; -EEXIST when the task's directory exists (the id is
 * taken: draw another); -errno with err.
 */
int api_secrets_keep(const char *state_dir, const char *id, const char *json, struct error *err);

int api_check_host_limits(struct api_call *c, uint64_t memory_bytes, uint64_t disk_bytes,
			  uint64_t state_bytes, uint64_t pids);

/* A query flag: absent, 0, false (false) or 1, true (true); else invalid_field. */
int api_query_flag(const struct api_query *q, const char *name, bool *ret, struct api_error *e);

/* ---- interactive sandboxes (sandboxes.c) -------------------------------- */

/* The fleet's operations, or NULL with an internal error set in c->err. */
const struct fleet_ops *api_fleet(struct api_call *c);

/*
 * A fleet result code r (fleet/fleet.h) as an API error in c->err: not
 * found, ended, paused, could not be built; a shim's refusal by its
 * errno as api_shim_error() says for `what` ("sandbox", "exec",
 * "process", "file"); anything else internal. Returns what api_error_*
 * return (or -ENOMEM).
 */
int api_fleet_error(struct api_call *c, int r, const struct error *err, const char *what);

/* The API error a shim's errno means for `what` (see api_fleet_error()). */
int api_shim_error(struct api_error *e, int errnum, const char *message, const char *what);

/* ---- files (sandbox-files.c, sandbox-files-tar.c) ------------------------ */

/*
 * How long the sandbox's copier may take no byte of an upload, and take
 * to finish once the body is in: a sandbox paused meanwhile, or a copier
 * stopped from inside, holds the upload's thread no longer.
 */
#define API_UPLOAD_STALL_MS 30000

/* fd (fleet_open()'s "write") is a copier's socket: bound its waits; false: a plain file. */
bool api_copier_prepare(int fd);
/* Send all of data to the copier. 0 or -errno (-EAGAIN: it took nothing for
 * API_UPLOAD_STALL_MS; -EPIPE: it ended, failed: the rename says why). */
int api_copier_send(int fd, const char *data, size_t len);
/*
 * All is sent: EOF to the copier, then wait (API_UPLOAD_STALL_MS at most)
 * until the socket reads EOF too, once the copier has ended and the
 * sandbox's init has taken its status: the rename that follows then finds
 * the upload done, and never makes init wait.
 */
void api_copier_wait(int fd);
/* A failed write into the sandbox (errnum: the copier's, or ours) as the API says it. */
int api_upload_error(struct api_error *e, int errnum, const char *message);

/* GET .../files?format=tar: directory path of the sandbox as a tar (a FILE response). */
int api_files_get_tar(struct api_call *c, const struct fleet_ops *ops, const char *path);
/* PUT .../files?format=tar, before the body: the spool it goes to (*ret_fd, owned). */
int api_files_tar_spool(struct api_call *c, int *ret_fd);
/*
 * PUT .../files?format=tar, once the body is whole in spool (read from
 * offset 0, left open): checked whole, then unpacked into directory dest
 * of sandbox id through ops; *ret gets the 200 answer. 0, or -errno with e.
 */
int api_files_tar_unpack(const struct fleet_ops *ops, struct fleet *f, const char *id,
			 const char *dest, int spool, struct api_response *ret,
			 struct api_error *e);

/* Sandbox c->id is live (need_running: and not paused), or an error is set. */
int api_sandbox_live(struct api_call *c, const struct fleet_ops *ops, bool need_running);

/* Answer status with v (taken; NULL = out of memory: -ENOMEM). */
int api_respond_json(struct api_call *c, int status, json_t *v);

/* ---- responses (sandboxes.c, errors.c) ---------------------------------- */

/* Replace ret's body with the error response of e. 0 or -ENOMEM. */
int api_error_respond(const struct api_error *e, struct api_response *ret);

/* A moment as the API shows it: "2024-05-01T12:00:00.123Z", or null for 0. */
json_t *api_time_json(int64_t ms);

/* The sandbox object of the API (docs/api.md), malloc'd; NULL = out of memory. */
char *api_sandbox_json(const struct sandbox_record *s);

/* A JSON response: takes text (malloc'd; NULL = out of memory: 500). */
void api_json_response(struct api_response *ret, int status, char *text);

/* ---- rendering (render.c) --------------------------------------------- */

/* "2024-05-01T12:00:00.123Z", or null for 0. */
void api_render_time(struct buf *b, int64_t ms);
/* A spec's "network" as stored, or {"mode":"none"} when it has none. */
void api_render_network(struct buf *b, const char *spec_json);

/* ',"secrets":{...}' (the public form: hosts, placeholders) when the spec has some. */
void api_render_secrets(struct buf *b, const char *spec_json);
/* ,"image":{...} and ,"user", ,"cwd" of a spec that has them (image-choice.h); else nothing. */
void api_render_image(struct buf *b, const char *spec_json);
/* The task object of GET /v1/tasks/{id}. */
/*
 * A task as the API shows it. With state_dir (GET /v1/tasks/{id} only),
 * also "progress_rejected": the progress lines its attempts refused.
 */
void api_render_task(struct buf *b, const struct task *t, const char *state_dir);
void api_render_event(struct buf *b, const struct task_event *ev);

#endif
