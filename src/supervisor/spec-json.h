/*
 * spec-json.h - the sandbox spec as the daemon writes it for a supervisor
 * (the "spec" of attempt.json and of sandbox.json), read into a struct
 * spec. The API validated it before the daemon wrote it; what is read
 * here is checked again by spec_validate() before anything is built.
 *
 *	"limits": {"memory_mb", "cpus", "pids", "disk_mb", "timeout_s"}
 *	          absent or non-positive values are the defaults
 *	"env":    {"KEY": "value", ...}
 *	"network": {"mode": "none" | "open" | "allow", ...}
 *	"image":  {"name": "python:3.12-slim", "digest": "sha256:...",
 *	           "config": "sha256:..."}: the image the API resolved
 *	"user":   "root" (only with an image; absent: the sandbox user)
 *	"cwd":    the image's WorkingDir, absolute (absent: the workdir)
 */
#ifndef AGENTBOX_SUPERVISOR_SPEC_JSON_H
#define AGENTBOX_SUPERVISOR_SPEC_JSON_H

#include "base/error.h"
#include "runtime/spec.h"

#include <jansson.h>

/* Set s's limits from limits (an object, or NULL for the defaults). */
void spec_json_limits(const json_t *limits, struct spec *s);

/* A task's limits.state_mb in bytes (SPEC_DEFAULT_STATE without one). */
uint64_t spec_json_state_bytes(const json_t *limits);

/*
 * Turn env (an object of strings, or NULL) into "KEY=VALUE" strings, in a
 * NULL-terminated array with room for extra more entries before its NULL.
 * The caller owns the array and its strings (strv_free()). where names
 * the field in errors ("attempt.json: spec.env"). 0 or -errno with err.
 */
int spec_json_env(const json_t *env, size_t extra, const char *where, char ***ret,
		  struct error *err);

/*
 * What a sandbox's network needs of its launcher (spec_json_network()).
 * Owns its strings.
 */
struct spec_network {
	bool allow;	  /* allow mode; else open */
	char *policy;	  /* allow: the spec's "network", as JSON */
	char *events;	  /* allow: the relay's refusals go here (LAYOUT_NETWORK_LOG) */
	char **extra;	  /* "--rate", "MBIT" (a cap), "--resolver", "ADDR:PORT",
			     "--allow-cidr", "CIDR", ...: what applies; NULL-terminated */
	int secrets_fd;	  /* the secrets' file (spec_json_secrets()), owned; 0: none */
	char *ca_volume;  /* "CA_PUBLIC:MOUNT:ro": the daemon's CA, for a sandbox with secrets */
	pid_t relay;	  /* the relay (agentbox-net), once started; 0 before */
	char host_if[16]; /* the link's host end, once attached: its counters are the bytes */
};

/*
 * The network the spec's "network" asks for ({"mode": "none" | "open" |
 * "allow", ...}; absent: none), with the host's "egress" settings the
 * daemon wrote beside the spec ({"resolver": "ADDR:PORT", "allow_cidr":
 * [...], "ca_dir", "ca_public", "ca_mount", "upstream_cacert"}; NULL:
 * none). secrets_fd (spec_json_secrets(); 0: none) becomes net's on
 * success: the proxy gets it as fd 4 (never in argv) and the CA's
 * directory (--ca), and s gets the CA's public files as a read-only
 * volume at ca_mount. For open and allow, *net is filled and s's
 * network_attach is spec_network_attach() with net as its argument:
 * agentbox-net (src/network/main.c), from next to this executable, makes
 * the link and stays as the sandbox's relay (open: its resolver; allow:
 * its resolver and proxy, writing refusals to events). 0 or
 * -EINVAL/-ENOMEM with err.
 */
int spec_json_network(const json_t *network, const json_t *egress, int secrets_fd,
		      const char *events, struct spec_network *net, struct spec *s,
		      struct error *err);

/*
 * When spec has "secrets": their values' 0600 file at path (core/layout.h's
 * LAYOUT_SECRETS), opened for the proxy, into *ret_fd (0 when spec has
 * none). The launcher never reads it: nothing of the values is ever in
 * its memory, which the sandbox's init is cloned from. consume: the file
 * is removed once open (the shim: its sandbox is started once). 0, or
 * -ENOENT / -EINVAL with err.
 */
int spec_json_secrets(const json_t *spec, const char *path, bool consume, int *ret_fd,
		      struct error *err);

/* spec->network_attach: arg is the struct spec_network. */
int spec_network_attach(void *arg, int pidfd, unsigned slot, struct error *err);

/*
 * As spec_network_attach(), with the link that p parked (a pooled
 * sandbox's, runtime/nethelper.h): p is none afterwards, either way.
 */
struct nethelper_park;
int spec_network_hand_out(struct spec_network *net, struct nethelper_park *p, struct error *err);

/*
 * The bytes the sandbox received (*ret_in) and sent (*ret_out) through its
 * link, from its two ends' counters (eth0's through /proc/<init_pid>: code
 * inside has no way to change them). 0, -ENODEV before the link is made,
 * -ENOENT once it is gone (with the sandbox), or -errno.
 */
int spec_network_bytes(const struct spec_network *net, pid_t init_pid, uint64_t *ret_in,
		       uint64_t *ret_out);

/* Free net's strings; net is zeroed. A relay started goes with its launcher. */
void spec_network_release(struct spec_network *net);

/* A spec's image (spec_json_image()): a use of its tree, held. */
struct spec_image {
	int use_fd;	 /* image_use_begin()'s; -1: no image */
	char tree[4096]; /* the tree's path: s->image_tree points here */
	char cwd[4096];	 /* s->cwd points here when the spec has one */
};

/*
 * The spec's "image", "user" and "cwd" (above) into s: for an image, a
 * use of its tree begins (image/store.h's image_use_begin() under
 * state_dir, the daemon's state directory) and lasts until
 * spec_image_release() or this process's end, so that the image cannot
 * be removed while the sandbox lives; s->image_tree, s->user and s->cwd
 * point into img, which must outlive s. Without an image img->use_fd is
 * -1 and s is unchanged. 0, -ENOENT (the image was removed since the
 * API resolved it) or -EINVAL with err.
 */
int spec_json_image(const json_t *spec, const char *state_dir, struct spec_image *img,
		    struct spec *s, struct error *err);
void spec_image_release(struct spec_image *img);

/* Free a NULL-terminated array of strings and the strings. NULL. */
char **strv_free(char **v);

#endif
