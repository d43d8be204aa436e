/*
 * daemon.h - what the pieces of agentboxd share: configuration, the pool
 * of store connections the HTTP threads use, the listeners, and the
 * scheduler's wake-up. The daemon is wiring: the API (src/api) decides
 * every answer, the scheduler (src/sched) runs tasks, the fleet
 * (src/fleet) keeps interactive sandboxes.
 *
 * Threads: libmicrohttpd runs one thread per connection; each takes a
 * store from the pool for the length of one request (streams open their
 * own). The scheduler runs in one thread of its own with its own store.
 * Nothing here clones sandboxes: supervisors do, in their own processes.
 */
#ifndef AGENTBOX_DAEMON_DAEMON_H
#define AGENTBOX_DAEMON_DAEMON_H

#include <jansson.h>
#include "api/api.h"
#include "api/terminal-get.h"
#include "base/error.h"
#include "fleet/fleet.h"
#include "sched/sched.h"
#include "egress/addr.h"
#include "store/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define DAEMON_SOCKET_DEFAULT	 "/run/agentbox/agentbox.sock"
#define DAEMON_STATE_DIR_DEFAULT "/var/lib/agentbox"
#define DAEMON_POOL_SIZE	 8
#define DAEMON_SANDBOXES_MAX	 1024 /* interactive sandboxes at once, by default */
#define DAEMON_CONNECTIONS_MAX	 256
#define DAEMON_QUEUED_MAX	 10000	 /* tasks waiting at once, by default */
#define DAEMON_QUEUED_LIMIT	 1000000 /* the most --max-queued takes */
#define DAEMON_ALLOW_CIDR_MAX	 64	 /* --allow-cidr options */
#define DAEMON_SOCKET_USERS_MAX	 64	 /* --socket-user options */

/*
 * What one client may hold (server.c). libmicrohttpd's timeouts count the
 * seconds since a byte last moved on the connection, not a deadline.
 *
 * HEADER: a connection waiting for a request's header (a new one, or a
 * kept-alive one between requests) is closed after this many seconds
 * without a byte; the header itself is bounded by libmicrohttpd's
 * connection memory (32 KiB).
 * IDLE: once the header is in, while the body arrives or a response
 * (a JSON body, a file) leaves. A handler at work (a blocking exec) and
 * a stream (logs -f, events, a process's output: they end when their
 * task or process does) are never timed out.
 */
#define DAEMON_HEADER_TIMEOUT_S 10
#define DAEMON_IDLE_TIMEOUT_S	60
/* Connections one address may hold on the TCP listener (the unix socket: no limit). */
#define DAEMON_TCP_PER_ADDRESS_MAX 64

/*
 * The most resident memory agentboxd holds under any load (docs/SECURITY.md,
 * "Resource bounds"): threads for DAEMON_CONNECTIONS_MAX connections on
 * each listener with DAEMON_BODY_OWN_KB of body each, DAEMON_BODIES_MAX_MB
 * of larger request bodies, and their parse, the stores, one
 * SERVER_FILE_BLOCK per download. The soak test holds the daemon to it,
 * and oom_score_adj is set from it (main.c).
 */
#define DAEMON_RSS_CEILING_MB 512

/*
 * Request bodies (server.c). Each connection holds up to
 * DAEMON_BODY_OWN_KB of its body on its own (every API body but a task's
 * files or a large command fits): the connections bound that, and no
 * client can take it from another. What a body holds past it comes out of
 * one budget for all connections, DAEMON_BODIES_MAX_MB, taken when its
 * Content-Length is known, before it is read, or chunk by chunk; past
 * it, 503 busy. jansson's tree of a body is at most about twice its size.
 */
#define DAEMON_BODY_OWN_KB   64
#define DAEMON_BODIES_MAX_MB 32

/*
 * Rate limits (api.h: api_admit(); rate.c). Per principal (an API key, or
 * a local user of the unix socket): agents poll a task's status and
 * stream its logs, a few requests a second each; 100 a second with a
 * burst of 200 leaves a busy client room and holds a runaway loop to
 * what the host serves easily. Per source, of failed auths: 20 at once,
 * then 10 a second: a client with a mistyped key is told 401 twenty
 * times and then waits a second at most; a flood of bad keys costs 10
 * store lookups a second per source. A burst not given is
 * DAEMON_RATE_BURST_FACTOR times its rate. A rate of 0 turns its limit
 * off. DAEMON_RATE_BUCKETS: the most principals and sources each table
 * keeps at once (ratelimit.h: what filling it gives).
 */
#define DAEMON_RATE_DEFAULT	      100
#define DAEMON_AUTH_FAIL_RATE_DEFAULT 10
#define DAEMON_RATE_BURST_FACTOR      2
#define DAEMON_RATE_BUCKETS	      4096

/*
 * TLS on the TCP listener (--tls-cert, --tls-key; tls.c, server.c): each
 * file is read whole, at most DAEMON_TLS_FILE_MAX bytes, and handed to
 * libmicrohttpd, whose GnuTLS speaks DAEMON_TLS_PRIORITIES: TLS 1.3 and
 * 1.2, nothing older.
 */
#define DAEMON_TLS_FILE_MAX   (1u << 20)
#define DAEMON_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/*
 * The certificate chain and private key, as PEM text (NUL-terminated).
 * Owned: daemon_tls_release() frees both; the key's bytes are zeroed
 * first, by daemon_tls_forget_key() too, once libmicrohttpd has parsed
 * it (it keeps its own copy, GnuTLS's).
 */
struct daemon_tls {
	char *cert; /* NULL: no TLS */
	char *key;
	size_t key_len;
	bool key_exposed; /* the key file is readable or writable by group or others */
	unsigned key_mode;
};

struct daemon_config {
	const char *socket_path;
	const char *state_dir;
	const char *listen;   /* "ADDR:PORT" or NULL */
	bool insecure_listen; /* --insecure-listen: a non-loopback --listen without TLS */
	const char *tls_cert; /* --tls-cert FILE, with --tls-key: --listen serves HTTPS */
	const char *tls_key;
	struct daemon_tls tls; /* their contents, read by parse_options() (main.c) */
	const char *supervisor_path;
	const char *shim_path;
	unsigned max_running;
	unsigned pool_size; /* warm sandboxes kept ready */
	int pool_network;   /* more, with their link parked (fleet.h); -1: pool_size */
	struct {
		const char *ref; /* --pool IMAGE=N: the image, as given */
		unsigned size;
	} image_pools[FLEET_IMAGE_POOLS_MAX];
	size_t nimage_pools;
	struct api_host_limits host; /* the most one sandbox or task may ask for */
	unsigned sandboxes_max;	     /* handed out at once; 0 = DAEMON_SANDBOXES_MAX */
	uint64_t sandbox_memory_max; /* their memory limits together; 0 = twice the host's */
	struct cidr allowed[DAEMON_ALLOW_CIDR_MAX]; /* --allow-cidr */
	const char *allowed_text[DAEMON_ALLOW_CIDR_MAX];
	size_t nallowed;
	const char *resolver; /* --resolver ADDR[:PORT], or NULL: the host's resolv.conf */
	struct api_local_user local_users[DAEMON_SOCKET_USERS_MAX]; /* --socket-user */
	size_t nlocal_users;
	const char *origins[API_ORIGINS_MAX]; /* --allow-origin: pages that may open terminals */
	size_t norigins;
	size_t audit_rows;	     /* --audit-rows (0: API_AUDIT_ROWS_DEFAULT) */
	struct quota quota_defaults; /* --tenant-quota: every tenant's, where its own do not say */
	const char *egress_cacert;   /* --egress-cacert FILE, or NULL: the host's CAs */
	const char *registry_config; /* --registry-config FILE (image/pull.h), or NULL */
	const char *debian_mirror;   /* --debian-mirror URL (image/bootstrap.h), or NULL */
	const char *debian_keyring;  /* --debian-keyring FILE, or NULL */
	/* --rate, --rate-burst, --auth-fail-rate, --auth-fail-burst (rate 0: no limit;
	 * burst 0: DAEMON_RATE_BURST_FACTOR times the rate) */
	uint32_t rate, rate_burst, auth_fail_rate, auth_fail_burst;
	int64_t retain_ms;    /* --retain: ended tasks and sandboxes kept this long; 0: for ever */
	uint64_t input_ttl_s; /* --input-ttl: untaken inputs kept this long; 0: the default */
};

struct store_pool {
	pthread_mutex_t lock;
	pthread_cond_t free_cond;
	struct store *stores[DAEMON_POOL_SIZE];
	bool busy[DAEMON_POOL_SIZE];
};

struct daemon {
	struct daemon_config cfg;
	struct store_pool pool;
	char db_path[4096];
	int wake_fd;		    /* eventfd: the scheduler's doorbell */
	struct fleet *fleet;	    /* the interactive sandboxes (fleet/fleet.h) */
	struct image_store *images; /* the image store (image/store.h) */
	/* --registry-config's registries (image/pull.h), read at start; never NULL then */
	struct image_registries *registries;
	struct sched *sched; /* the scheduler, driven by its own thread */
	volatile int stopping;
	atomic_size_t bodies; /* bytes of request bodies held now (DAEMON_BODIES_MAX_MB) */
	struct api_rate rate; /* its tables: daemon_rate_start() */
	pthread_mutex_t network_lock;
	bool network_ready;
	bool secrets_ready;
	/* the CA for secrets is there (daemon_egress_ca()) */ /* agentbox's table is installed
								  (network.c) */
	struct daemon_retain *retain; /* --retain's thread (retain.c); NULL: none */
};

int store_pool_init(struct store_pool *p, const char *db_path, struct error *err);
struct store *store_pool_get(struct store_pool *p);
void store_pool_put(struct store_pool *p, struct store *st);
void store_pool_release(struct store_pool *p);

/*
 * The HTTP side: one listener per socket (unix: the peer's uid; TCP: a
 * key). tls: serve HTTPS with it (the TCP listener only), or NULL; it is
 * read during the call only. -ENOTSUP when libmicrohttpd has no TLS.
 */
struct listener;
int server_start(struct daemon *d, int listen_fd, const struct daemon_tls *tls,
		 struct listener **ret, struct error *err);
void server_stop(struct listener *l);

/*
 * The host's side of sandboxes with a network (network.c). ready: the
 * API's network_ready hook (data: the daemon), installs agentbox's table
 * and turns on forwarding, once. start: replaces a table left by an
 * earlier daemon. stop: on a clean stop, removes it when nothing needs
 * it any more (no sandbox link, no task waiting or running).
 */
int daemon_network_ready(void *data, struct error *err);
int daemon_network_start(struct daemon *d, struct error *err);
/* fleet_config.link_mode: a parked link handed out, into its mode's group. */
int daemon_link_mode(const char *host_if, bool allow, struct error *err);

/*
 * API keys (keys.c). adopt_token: an older state directory's token file,
 * into the store as the legacy admin key (api.h's API_LEGACY_KEY_ID, its
 * SHA-256 only), and the file removed; none: nothing. print_key: a new
 * admin key of the default tenant, made in the state directory's store
 * and printed on stdout (agentboxd --print-token). 0 or -errno with err.
 */
int daemon_adopt_token(const char *state_dir, struct store *st, struct error *err);
int daemon_print_key(const char *state_dir, struct error *err);

/*
 * The unix socket's local users (users.c): "UID=TENANT" (UID a number or
 * a user's name) of --socket-user, and the socket's ACL, which lets root
 * and exactly these users connect. 0 or -errno with err.
 */
int socket_user_parse(const char *text, struct api_local_user *ret, struct error *err);
/* Each --socket-user's tenant, made if it is not there (a deleted one: -EEXIST). */
int daemon_socket_tenants(struct daemon *d, struct store *st, struct error *err);
int socket_acl_set(const char *path, const struct api_local_user *users, size_t n,
		   struct error *err);
int daemon_network_stop(struct daemon *d, bool tasks_waiting, struct error *err);

/*
 * The CA that signs the proxy's certificates for secrets' hosts
 * (network/intercept.h), in <state>/egress-ca. egress_ca: where launchers
 * find it, into egress (the "egress" object launchers get): "ca_dir",
 * "ca_public", "ca_mount", and "upstream_cacert" with --egress-cacert;
 * 0 or -ENOMEM / -ENAMETOOLONG. secrets_ready: the API's hook, before a
 * task or sandbox with secrets is admitted: makes the CA the first time
 * (once per run of the daemon, so a start never waits for it), and
 * keeps the bundle of the host's CAs in step. 0, or -errno with err.
 */
int daemon_egress_ca(struct daemon *d, json_t *egress);
int daemon_secrets_ready(void *data, struct error *err);

/*
 * Rate limits (rate.c). option: one of --rate ('r'), --rate-burst ('b'),
 * --auth-fail-rate ('f'), --auth-fail-burst ('g') into cfg; 0, or -EINVAL
 * after a message on stderr. start: the tables of d->rate from d->cfg
 * (a burst of 0: DAEMON_RATE_BURST_FACTOR times its
 * rate); stop frees them. 0 or -errno with err.
 */
int daemon_rate_option(struct daemon_config *cfg, int opt, const char *arg);
int daemon_rate_start(struct daemon *d, struct error *err);
void daemon_rate_stop(struct daemon *d);

/*
 * --tls-cert and --tls-key (tls.c): both files into *ret (a regular file
 * each, at most DAEMON_TLS_FILE_MAX bytes, PEM; the key's must hold a
 * private key). 0, or -errno with err naming the option and the file.
 */
int daemon_tls_load(const char *cert_path, const char *key_path, struct daemon_tls *ret,
		    struct error *err);
/*
 * The options' checks and the files (main.c's parse_options()): neither
 * option is fine (no TLS); one without the other, or both without
 * --listen, is -EINVAL; then daemon_tls_load() into cfg->tls, and a
 * warning on stderr when the key's file is open to its group or others.
 * 0, or -errno with err.
 */
int daemon_tls_configure(struct daemon_config *cfg, struct error *err);
/* Zero and free the key (the certificate stays). Accepts NULL. */
void daemon_tls_forget_key(struct daemon_tls *t);
/* Zero the key, free both. Accepts NULL. */
void daemon_tls_release(struct daemon_tls *t);

/*
 * Removing what ended (retain.c, over sched/retain.h). option: --retain
 * DURATION (or "none") into cfg->retain_ms; 0, or -EINVAL after a message
 * on stderr. sweep: at the start, before the listeners, the task
 * directories no row names (a crash in a removal left them), and the
 * inputs no task took that are past --input-ttl. start: with
 * --retain, a thread of its own, with its own store, that removes ended
 * tasks and sandbox records older than it, RETAIN_BATCH of each a pass,
 * a pass every retain_tick_ms(); stop joins it. 0 or -errno with err.
 */
int daemon_retain_option(struct daemon_config *cfg, const char *arg);
/* --input-ttl DURATION (1s..30d) into cfg->input_ttl_s; 0, or -EINVAL after a message. */
int daemon_input_ttl_option(struct daemon_config *cfg, const char *arg);
int daemon_retain_sweep(struct daemon *d, struct store *st, struct error *err);
int daemon_retain_start(struct daemon *d, struct error *err);
void daemon_retain_stop(struct daemon *d);

/* Ring the scheduler's doorbell. */
void daemon_wake(struct daemon *d);

/* Listening sockets (listen.c): the fd, or -errno with err. */
int listen_unix(const char *path, struct error *err);
/*
 * "ADDR:PORT", "[ADDR6]:PORT": a loopback address, or any when keys
 * cannot cross the network in clear: tls (--tls-cert) or insecure
 * (--insecure-listen); else -EPERM.
 */
int listen_tcp(const char *spec, bool tls, bool insecure, struct error *err);
/* What listen_tcp() would refuse of spec, without a socket: for the options. */
int listen_tcp_check(const char *spec, bool tls, bool insecure, struct error *err);

/*
 * --pool IMAGE=N (image-pools.c): arg split in place at its last '=' and
 * kept in d->cfg.image_pools (the last N of an IMAGE given twice counts).
 * 0, or -1 with the message printed.
 */
int daemon_pool_image_option(struct daemon *d, char *arg);

/*
 * The images' pools of d->cfg, into pools (as many): each image resolved
 * in d->images as a create of {"image": IMAGE} would be, its spec
 * malloc'd (the caller frees them). An image the store lacks is -EINVAL
 * with err naming it: the daemon does not start.
 */
int daemon_image_pools(struct daemon *d, struct fleet_image_pool *pools, struct error *err);

#endif
