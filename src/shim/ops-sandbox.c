/* pause, resume, upper, expire, network, status, stop: the sandbox as a whole. */
#include "shim/shim-internal.h"

#include "base/cleanup.h"
#include "supervisor/spec-json.h"

#include <errno.h>
#include <stdint.h>

static int set_paused(struct shim *s, struct conn *c, bool paused, struct error *err)
{
	if (s->end_reason || !s->sb)
		return error_set(err, ECANCELED, "the sandbox is ending");
	if (s->paused != paused) {
		int r = sandbox_freeze(s->sb, paused, err);
		if (r < 0) {
			/* half frozen is the worst of both: init could not answer */
			struct error ignored = {0};
			if (paused)
				(void)sandbox_freeze(s->sb, false, &ignored);
			return r;
		}
		s->paused = paused;
		shim_note("the sandbox is %s", paused ? "paused" : "resumed");
	}
	return reply_ok(s, c);
}

int op_pause(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	return set_paused(s, c, true, err);
}

int op_resume(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	return set_paused(s, c, false, err);
}

/*
 * An image's sandbox, paused: its upper layer's directory (serve.h's
 * sandbox_upper()), passed with the reply, and the first host id of its
 * range ("id_base"), for a commit (image/commit.h). Paused only: a
 * running sandbox would change it under the reader.
 */
int op_upper(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	if (s->end_reason || !s->sb)
		return error_set(err, ECANCELED, "the sandbox is ending");
	if (!s->paused)
		return error_set(err, EBUSY, "the sandbox is running: pause it first");
	_cleanup_close_ int upper = -1;
	int r = sandbox_upper(s->sb, &upper, err);
	if (r < 0)
		return r;
	_cleanup_json_ json_t *m =
	    json_pack("{s:s, s:I}", "type", "ok", "id_base", (json_int_t)sandbox_id_base(s->sb));
	if (!m)
		return error_set(err, ENOMEM, "out of memory");
	(void)conn_send(s, c, m, upper); /* a peer gone is no error of the sandbox's */
	return 0;
}

int op_expire(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	int64_t at;
	int r = req_int(req, "expires_at", true, 0, INT64_MAX, 0, &at, err);
	if (r < 0)
		return r;
	if (s->end_reason || !s->sb)
		return error_set(err, ECANCELED, "the sandbox is ending");
	s->expires_at = at; /* the loop ends it once this has passed, now or later */
	return reply_ok(s, c);
}

/*
 * A pooled sandbox, claimed with a network: its link, before it is handed
 * out, and its expiry (as op_expire). A link parked with the sandbox is
 * handed out, and the reply names it ("link"): the daemon puts it into its
 * mode's group; else one is made now.
 */
int op_network(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)fd;
	int64_t at = 0;
	int r = req_int(req, "expires_at", false, 0, INT64_MAX, 0, &at, err);
	if (r < 0)
		return r;
	if (s->end_reason || !s->sb)
		return error_set(err, ECANCELED, "the sandbox is ending");
	if (s->networked)
		return error_set(err, EEXIST, "the sandbox has a network already");
	if (json_object_get(req, "expires_at"))
		s->expires_at = at;
	struct spec net = {0};
	r = spec_json_network(json_object_get(req, "network"), json_object_get(req, "egress"), 0,
			      s->network_log, &s->net, &net, err);
	if (r < 0)
		return r;
	if (!net.network_attach && s->parked.helper > 0)
		return error_set(err, EINVAL,
				 "a sandbox with a parked link is handed out with one");
	if (!net.network_attach)
		return reply_ok(s, c);
	if (s->parked.helper > 0 && !nethelper_park_alive(&s->parked)) {
		spec_network_release(&s->net);
		return error_set(err, ENODEV, "the parked link's helper is gone");
	}
	if (s->parked.helper <= 0) {
		if ((r = sandbox_attach_network(s->sb, net.network_attach, net.network_arg, err)) <
		    0) {
			spec_network_release(&s->net);
			return r;
		}
		s->networked = true;
		shim_note("the sandbox's network is %s", s->net.allow ? "allow" : "open");
		return reply_ok(s, c);
	}
	/*
	 * The parked link: a capped one is handed out before the reply (the cap
	 * is in place before the sandbox is handed out). Any other after it, so
	 * that the daemon, which puts the link into its mode's group, does not
	 * wait while the helper wakes and takes a CPU: what the sandbox sends
	 * before the helper serves waits in the relay's sockets. A helper that
	 * fails then ends the sandbox, with its message (the link has no relay).
	 */
	shim_unwatch(s, &s->parked_watch); /* its output is the hand-out's now */
	bool capped =
	    json_integer_value(json_object_get(json_object_get(req, "network"), "rate_mbit")) > 0;
	_cleanup_json_ json_t *m = json_pack("{s:s, s:s}", "type", "ok", "link", s->parked.host_if);
	if (!m || (capped && (r = spec_network_hand_out(&s->net, &s->parked, err)) < 0)) {
		spec_network_release(&s->net);
		return m ? r : error_set(err, ENOMEM, "out of memory");
	}
	conn_send(s, c, m, -1);
	if (!capped && (r = spec_network_hand_out(&s->net, &s->parked, err)) < 0) {
		/* handed out already, but with no relay: it cannot go on */
		spec_network_release(&s->net);
		shim_end(s, "failed", "%s", err->msg);
		return 0;
	}
	s->networked = true;
	shim_note("the sandbox's network is %s", s->net.allow ? "allow" : "open");
	return 0;
}

int op_status(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	_cleanup_json_ json_t *m = json_pack(
	    "{s:s, s:b, s:I, s:i, s:I, s:b}", "type", "status", "paused", s->paused, "expires_at",
	    (json_int_t)s->expires_at, "init_pid", s->sb ? (int)sandbox_init_pid(s->sb) : 0,
	    "running", (json_int_t)s->running, "ending", s->end_reason != NULL);
	if (!m)
		return error_set(err, ENOMEM, "out of memory");
	uint64_t in, out;
	if (s->networked && s->sb && !s->end_reason &&
	    spec_network_bytes(&s->net, sandbox_init_pid(s->sb), &in, &out) == 0 &&
	    json_object_set_new(m, "network",
				json_pack("{s:s, s:I, s:I}", "mode",
					  s->net.allow ? "allow" : "open", "bytes_in",
					  (json_int_t)in, "bytes_out", (json_int_t)out)) < 0)
		return error_set(err, ENOMEM, "out of memory");
	conn_send(s, c, m, -1);
	return 0;
}

int op_stop(struct shim *s, struct conn *c, json_t *req, int fd, struct error *err)
{
	(void)req;
	(void)fd;
	(void)err;
	reply_ok(s, c);
	shim_end(s, "deleted", "deleted on request");
	return 0;
}
