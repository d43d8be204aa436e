/*
 * agentbox image: agentboxd's image store, one subcommand each: import,
 * pull, bootstrap, export, ls, inspect, rm, prune. Images are the host's:
 * any key may list and inspect them; import, pull, bootstrap, export, rm
 * and prune are an admin's (an admin key, or root on agentboxd's unix
 * socket).
 */
#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"
#include "cli/cli.h"
#include "cli/upload.h"
#include "cli/options.h"
#include "client/client.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Bytes of an image's reference we send (agentboxd checks it: image/oci.h). */
#define IMAGE_REF_ARG_MAX 255
/* How long an import may take once its archive is sent: agentboxd unpacks it meanwhile. */
#define IMPORT_ANSWER_TIMEOUT_MS (60 * 60 * 1000)
/* How long a bootstrap's answer may take: agentboxd kills debootstrap past 30 min. */
#define BOOTSTRAP_ANSWER_TIMEOUT_MS (40 * 60 * 1000)
/* Bytes of a mirror's URL we send (agentboxd checks it: image/bootstrap.h). */
#define MIRROR_ARG_MAX 255
/* The most an export may send: agentboxd's IMAGE_EXPORT_MAX (image/commit.h). */
#define EXPORT_MAX ((16ULL << 30) + (1ULL << 20))

static const char help[] =
    "usage: agentbox image COMMAND [OPTIONS] ...\n"
    "\n"
    "Images: OCI images kept by agentboxd, each unpacked once into a read-only\n"
    "tree. import, pull, export, rm and prune need an admin key ($AGENTBOX_KEY) or\n"
    "root on agentboxd's unix socket; ls and inspect any key.\n"
    "\n"
    "commands:\n"
    "  import    import an OCI image layout (a tar of one) or a docker save archive\n"
    "  pull      pull an image from a registry (OCI distribution API)\n"
    "  export    write an image out as an OCI image layout tar\n"
    "  bootstrap make a Debian base image with debootstrap (debian:bookworm)\n"
    "  ls        list images\n"
    "  inspect   show an image: its config, layers and sizes, as JSON\n"
    "  rm        remove images (refused while one is in use)\n"
    "  prune     remove unnamed images, and blobs and trees no image names\n"
    "\n"
    "`agentbox image COMMAND --help` describes one.\n"
    "exit status: 0 done; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

#define HELP_REF                                                                                   \
	"REF is a name, \"name[:tag]\" (\":latest\" when no tag), or an image's digest,\n"         \
	"\"sha256:<64 hex digits>\".\n"

enum { OPT_JSON = CLI_OPT_VERB, OPT_NAME, OPT_MIRROR };

static const struct option options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"name", required_argument, NULL, OPT_NAME},
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"socket", required_argument, NULL, CLI_OPT_SOCKET},
    {"help", no_argument, NULL, 'h'},
    {"mirror", required_argument, NULL, OPT_MIRROR},
    {0},
};

struct opts {
	const char *socket_path; /* NULL = not given */
	const char *name;	 /* import --name */
	const char *output;	 /* export -o */
	const char *mirror;	 /* bootstrap --mirror */
	bool json, quiet;
};

/* The options; -1 with *o filled and optind at the first operand, else the exit status. */
static int parse_options(const char *verb, const char *help_text, int argc, char **argv,
			 struct opts *o)
{
	*o = (struct opts){0};
	int opt;
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":qho:", options, NULL)) != -1) {
		switch (opt) {
		case 'h':
			fputs(help_text, stdout);
			return 0;
		case 'q':
			o->quiet = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_MIRROR:
			o->mirror = optarg;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_NAME:
			o->name = optarg;
			break;
		case CLI_OPT_SOCKET:
			o->socket_path = optarg;
			break;
		default:
			return cli_option_error(verb, opt, argv);
		}
	}
	return -1;
}

/* 0 when ref is safe in a path (agentboxd checks the rest), else the exit status. */
static int check_ref(const char *verb, const char *ref)
{
	size_t n = strlen(ref);
	bool ok = n > 0 && n <= IMAGE_REF_ARG_MAX && ref[0] != '/';
	for (size_t i = 0; ok && i < n; i++)
		ok = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:",
			    ref[i]) != NULL;
	if (ok)
		return 0;
	return cli_fail("%s: '%s' is not an image's name or digest", verb, ref);
}

static void image_target(char *buf, size_t size, const char *ref)
{
	snprintf(buf, size, "/v1/images/%s", ref);
}

static int call_once(const char *socket_path, const char *method, const char *target, json_t **ret,
		     struct error *err)
{
	struct client c;
	int r = client_init(&c, socket_path, err);
	if (r == 0)
		r = client_call(&c, method, target, NULL, ret, err);
	client_release(&c);
	return r;
}

static int print_json(const char *verb, const json_t *v)
{
	if (client_print_json(stdout, v) < 0 || fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- import ------------------------------------------------------------------ */

static const char import_help[] =
    "usage: agentbox image import [OPTIONS] FILE|DIR\n"
    "\n"
    "Send FILE to agentboxd and import the image in it, printing its name or,\n"
    "unnamed, its digest. FILE is a tar (plain, gzip or zstd) of an OCI image\n"
    "layout (oci-layout, index.json, blobs/), or a `docker save` archive. Of an\n"
    "index with several images, the linux/amd64 one is taken. Every blob's\n"
    "digest and size is checked against what its manifest says; a mismatch is\n"
    "refused (invalid_image) and nothing of the image is kept. FILE may be a\n"
    "directory holding a layout: it is sent as a tar of it, which tar(1) makes\n"
    "into an unnamed temporary file in $TMPDIR (default /tmp) first.\n"
    "\n"
    "options:\n"
    "  --name REF      the name to give it (default: the archive's own, if it\n"
    "                  has one: a docker save's RepoTags, a layout's\n"
    "                  io.containerd.image.name or org.opencontainers.image.\n"
    "                  ref.name when that is a full \"name:tag\")\n"
    "  --json          print the image as agentboxd answered\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 imported; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; an error of agentboxd's ends in its code, e.g.\n"
    "(invalid_image)).\n";

/*
 * A tar of directory dir in an unnamed temporary file, made by tar(1)
 * (Debian's essential tar: agentbox is linked statically and carries no
 * tar writer of its own): its fd, at offset 0, into *ret_fd.
 */
static int tar_directory(const char *verb, const char *dir, int *ret_fd)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	_cleanup_close_ int fd = open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return cli_fail("%s: a temporary file in %s: %s", verb, tmp, strerror(errno));
	char *const args[] = {
	    "tar", "--format=posix", "--numeric-owner", "-C", (char *)dir, "-cf", "-", ".", NULL};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	pid_t pid;
	int e = posix_spawnp(&pid, "tar", &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e != 0)
		return cli_fail("%s: cannot run tar to send %s: %s", verb, dir, strerror(e));
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return cli_fail("%s: waiting for tar: %s", verb, strerror(errno));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return cli_fail("%s: tar of %s failed (its message is above)", verb, dir);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return cli_fail("%s: %s", verb, strerror(errno));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int image_import(int argc, char **argv)
{
	const char *verb = "image import";
	struct opts o;
	int rc = parse_options(verb, import_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one FILE or DIR (see agentbox %s --help)", verb, verb);
	const char *file = argv[optind];
	if (o.name && (rc = check_ref(verb, o.name)) != 0)
		return rc;
	_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return cli_fail("%s: %s: %s", verb, file, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		CLOSE_FD(fd);
		if ((rc = tar_directory(verb, file, &fd)) != 0)
			return rc;
		if (fstat(fd, &st) < 0)
			return cli_fail("%s: %s", verb, strerror(errno));
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0)
		return cli_fail("%s: %s is not a regular file with something in it", verb, file);
	char target[CLIENT_TARGET_MAX];
	snprintf(target, sizeof(target), "/v1/images/import%s%s", o.name ? "?name=" : "",
		 o.name ? o.name : "");
	struct cli_upload u = {.fd = fd, .name = file, .size = (uint64_t)st.st_size};
	struct client_request req = {
	    .method = "POST",
	    .target = target,
	    .content_type = "application/x-tar",
	    .read_timeout_ms = IMPORT_ANSWER_TIMEOUT_MS,
	};
	cli_upload_body(&req, &u);
	struct error err = {0};
	struct client c;
	_cleanup_json_ json_t *image = NULL;
	int r = client_init(&c, o.socket_path, &err);
	if (r == 0)
		r = client_request(&c, &req, &image, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o.json)
		return print_json(verb, image);
	const char *name = json_string_value(json_object_get(image, "name"));
	const char *digest = json_string_value(json_object_get(image, "digest"));
	if (!name && !digest)
		return cli_fail("%s: agentboxd's answer has no name or digest", verb);
	if (cli_print_text(name ? name : digest) < 0)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/*
 * POST body to target, an image route that answers with the image after
 * timeout_ms at most (a pull, a bootstrap: minutes), and print it: as JSON
 * with --json, else its name (or, unnamed, its digest).
 */
static int post_image(const char *verb, const struct opts *o, const char *target,
		      const json_t *body, int timeout_ms)
{
	struct client_request req = {
	    .method = "POST", .target = target, .json = body, .read_timeout_ms = timeout_ms};
	struct error err = {0};
	struct client c;
	_cleanup_json_ json_t *image = NULL;
	int r = client_init(&c, o->socket_path, &err);
	if (r == 0)
		r = client_request(&c, &req, &image, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o->json)
		return print_json(verb, image);
	const char *name = json_string_value(json_object_get(image, "name"));
	const char *digest = json_string_value(json_object_get(image, "digest"));
	if (!name && !digest)
		return cli_fail("%s: agentboxd's answer has no name or digest", verb);
	if (cli_print_text(name ? name : digest) < 0)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- pull ---------------------------------------------------------------------- */

/* Bytes of a reference to pull we send (agentboxd checks it: image/pull.h). */
#define PULL_REF_ARG_MAX 511
/* How long a pull may take: agentboxd fetches and unpacks the image meanwhile. */
#define PULL_ANSWER_TIMEOUT_MS (6 * 60 * 60 * 1000)

static const char pull_help[] =
    "usage: agentbox image pull [OPTIONS] REF\n"
    "\n"
    "Have agentboxd pull image REF from its registry (the OCI distribution API)\n"
    "and import it, printing its name or, unnamed, its digest. REF is\n"
    "[HOST[:PORT]/]REPO[:TAG][@sha256:DIGEST]: without a HOST (a first part with\n"
    "a '.', a ':' or \"localhost\"), Docker Hub (\"debian:12\" is\n"
    "library/debian:12 there); without a tag or digest, \":latest\". Of an\n"
    "index, the linux/amd64 image is taken. Every blob is checked against its\n"
    "digest and size. Credentials, CAs and plain-http registries are agentboxd's\n"
    "to know: agentboxd --registry-config (docs/images.md).\n"
    "\n"
    "options:\n"
    "  --name REF      the name to give it (default: REF's own, \"debian:12\" or\n"
    "                  \"HOST:PORT/REPO:TAG\"; a digest alone: unnamed)\n"
    "  --json          print the image as agentboxd answered\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 pulled; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr, ending in agentboxd's code: (not_found) when the registry\n"
    "has no such image, (registry_error) when it cannot be reached, refuses the\n"
    "credentials or answers wrong).\n";

static int image_pull(int argc, char **argv)
{
	const char *verb = "image pull";
	struct opts o;
	int rc = parse_options(verb, pull_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one REF (see agentbox %s --help)", verb, verb);
	const char *ref = argv[optind];
	if (!*ref || strlen(ref) > PULL_REF_ARG_MAX)
		return cli_fail("%s: a REF has 1 to %d bytes", verb, PULL_REF_ARG_MAX);
	if (o.name && (rc = check_ref(verb, o.name)) != 0)
		return rc;
	_cleanup_json_ json_t *body = json_pack("{s:s, s:s*}", "ref", ref, "name", o.name);
	if (!body)
		return cli_fail("%s: out of memory", verb);
	return post_image(verb, &o, "/v1/images/pull", body, PULL_ANSWER_TIMEOUT_MS);
}

/* ---- export ------------------------------------------------------------------ */

static const char export_help[] =
    "usage: agentbox image export [OPTIONS] REF\n"
    "\n"
    "Write image REF as an OCI image layout in a tar: oci-layout, index.json\n"
    "(its manifest, named with org.opencontainers.image.ref.name when the\n"
    "image has a name) and blobs/sha256/ (its manifest, config and layers, as\n"
    "agentboxd keeps them). `skopeo inspect oci-archive:FILE` reads it, and\n"
    "`agentbox image import FILE` of it gives the same digest. agentboxd\n"
    "writes the whole tar on its own disk before it sends the first byte.\n" HELP_REF "\n"
    "options:\n"
    "  -o, --output FILE  write it to FILE (made beside it, then renamed: no\n"
    "                     half-written FILE); default standard output, when\n"
    "                     that is not a terminal\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 written; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; e.g. (not_found)).\n";

/* The temporary file of an export, removed if a signal ends us before its rename. */
static char export_tmp[PATH_MAX + 64];

static void export_drop_tmp(int sig)
{
	if (export_tmp[0])
		unlink(export_tmp);
	raise(sig); /* SA_RESETHAND: now the default action */
}

static void export_guard(bool on)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct sigaction sa = {.sa_handler = on ? export_drop_tmp : SIG_DFL,
			       .sa_flags = SA_RESETHAND};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

struct download {
	int fd;
	uint64_t got;
};

static int write_piece(const struct http_response *res, const char *buf, size_t len, void *data,
		       struct error *err)
{
	(void)res;
	struct download *d = data;
	if (len > EXPORT_MAX - d->got)
		return error_set(err, EFBIG, "agentboxd sent more than %llu bytes",
				 (unsigned long long)EXPORT_MAX);
	d->got += len;
	int r = write_all(d->fd, buf, len);
	if (r < 0)
		return error_set_errno(err, -r, "writing the tar");
	return 0;
}

static int export_to(const char *verb, const char *target, const char *socket_path, int fd)
{
	struct download d = {.fd = fd};
	struct client_request req = {
	    .method = "GET",
	    .target = target,
	    .accept = "application/x-tar",
	    .on_body = write_piece,
	    .data = &d,
	    .read_timeout_ms = IMPORT_ANSWER_TIMEOUT_MS, /* the tar is made before it is sent */
	};
	struct error err = {0};
	struct client c;
	int r = client_init(&c, socket_path, &err);
	if (r == 0)
		r = client_request(&c, &req, NULL, &err);
	client_release(&c);
	if (r < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return 0;
}

static int image_export(int argc, char **argv)
{
	const char *verb = "image export";
	struct opts o;
	int rc = parse_options(verb, export_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one REF (see agentbox %s --help)", verb, verb);
	if ((rc = check_ref(verb, argv[optind])) != 0)
		return rc;
	char target[CLIENT_TARGET_MAX];
	snprintf(target, sizeof(target), "/v1/images/%s/export", argv[optind]);
	if (!o.output || strcmp(o.output, "-") == 0) {
		if (isatty(STDOUT_FILENO))
			return cli_fail("%s: standard output is a terminal: give -o FILE", verb);
		return export_to(verb, target, o.socket_path, STDOUT_FILENO);
	}
	_cleanup_free_ char *dir_copy = strdup(o.output);
	if (!dir_copy)
		return cli_fail("%s: out of memory", verb);
	const char *dir = dirname(dir_copy);
	int w = snprintf(export_tmp, sizeof(export_tmp), "%s/.agentbox-export-XXXXXX", dir);
	if (w < 0 || (size_t)w >= sizeof(export_tmp))
		return cli_fail("%s: %s: the path is too long", verb, o.output);
	export_guard(true);
	_cleanup_close_ int fd = mkostemp(export_tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		export_tmp[0] = '\0';
		export_guard(false);
		return cli_fail("%s: cannot create a file in %s: %s", verb, dir, strerror(e));
	}
	rc = export_to(verb, target, o.socket_path, fd);
	if (rc == 0 && (fchmod(fd, 0644) < 0 || fsync(fd) < 0 || close(TAKE_FD(fd)) < 0))
		rc = cli_fail("%s: writing %s: %s", verb, export_tmp, strerror(errno));
	if (rc == 0 && rename(export_tmp, o.output) < 0)
		rc = cli_fail("%s: cannot rename %s to %s: %s", verb, export_tmp, o.output,
			      strerror(errno));
	if (rc != 0)
		unlink(export_tmp);
	export_tmp[0] = '\0';
	export_guard(false);
	return rc;
}

/* ---- bootstrap ----------------------------------------------------------------- */

static const char bootstrap_help[] =
    "usage: agentbox image bootstrap [OPTIONS] debian:SUITE\n"
    "\n"
    "Make a Debian base image: agentboxd runs debootstrap --variant=minbase of\n"
    "SUITE (bookworm, trixie...) from its Debian mirror (agentboxd\n"
    "--debian-mirror; its Release signed by a key of --debian-keyring), packs\n"
    "the tree as one layer and imports it, named debian:SUITE, printing the\n"
    "name. It takes minutes; agentboxd kills debootstrap past 30 minutes. The\n"
    "image runs /bin/bash by default, with Debian's PATH.\n"
    "\n"
    "options:\n"
    "  --name REF      the name to give it (default debian:SUITE)\n"
    "  --mirror URL    another mirror, http:// or https:// (default:\n"
    "                  agentboxd's --debian-mirror)\n"
    "  --json          print the image as agentboxd answered\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 made; 125 agentbox or agentboxd failed or refused (one line\n"
    "on stderr; a failed debootstrap ends in its last lines and\n"
    "(bootstrap_failed)).\n";

static int image_bootstrap(int argc, char **argv)
{
	const char *verb = "image bootstrap";
	struct opts o;
	int rc = parse_options(verb, bootstrap_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one debian:SUITE (see agentbox %s --help)", verb, verb);
	const char *image = argv[optind];
	if ((rc = check_ref(verb, image)) != 0 || (o.name && (rc = check_ref(verb, o.name)) != 0))
		return rc;
	if (o.mirror && strlen(o.mirror) > MIRROR_ARG_MAX)
		return cli_fail("%s: --mirror: a URL of at most %d bytes", verb, MIRROR_ARG_MAX);
	_cleanup_json_ json_t *body =
	    json_pack("{s:s, s:s*, s:s*}", "image", image, "name", o.name, "mirror", o.mirror);
	if (!body)
		return cli_fail("%s: out of memory", verb);
	return post_image(verb, &o, "/v1/images/bootstrap", body, BOOTSTRAP_ANSWER_TIMEOUT_MS);
}

/* ---- ls ------------------------------------------------------------------------ */

static const char ls_help[] =
    "usage: agentbox image ls [OPTIONS]\n"
    "\n"
    "List images, one line each: NAME (<none> when unnamed), DIGEST (the\n"
    "first 12 hex digits of its manifest's), SIZE (of its blobs, MiB) and\n"
    "CREATED (its config's date).\n"
    "\n"
    "options:\n"
    "  -q, --quiet     print only the names (the digest of an unnamed one)\n"
    "  --json          print the JSON array of images agentboxd answered\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 listed; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr).\n";

static void column(const json_t *v, const char *key, const char *none, char *buf, size_t size)
{
	const char *s = json_string_value(json_object_get(v, key));
	struct term_line l;
	term_line_init(&l, buf, size);
	term_line_adds(&l, s ? s : none);
}

static int image_ls(int argc, char **argv)
{
	const char *verb = "image ls";
	struct opts o;
	int rc = parse_options(verb, ls_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	if (o.json && o.quiet)
		return cli_fail("%s: -q and --json exclude each other", verb);
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (call_once(o.socket_path, "GET", "/v1/images", &answer, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	json_t *images = json_object_get(answer, "images");
	if (!json_is_array(images))
		return cli_fail("%s: agentboxd's answer has no images", verb);
	if (o.json)
		return print_json(verb, images);
	char name[IMAGE_REF_ARG_MAX + 1], digest[80], created[40];
	size_t i;
	json_t *v;
	int width = 4;
	json_array_foreach(images, i, v)
	{
		column(v, "name", "<none>", name, sizeof(name));
		if ((int)strlen(name) > width)
			width = (int)strlen(name);
	}
	if (!o.quiet)
		printf("%-*s  %-12s  %10s  %s\n", width, "NAME", "DIGEST", "SIZE", "CREATED");
	json_array_foreach(images, i, v)
	{
		column(v, "name", "<none>", name, sizeof(name));
		column(v, "digest", "?", digest, sizeof(digest));
		column(v, "created", "-", created, sizeof(created));
		const char *hex = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
		if (o.quiet) {
			printf("%s\n", json_is_string(json_object_get(v, "name")) ? name : digest);
			continue;
		}
		json_int_t size = json_integer_value(json_object_get(v, "size"));
		printf("%-*s  %-12.12s  %7.1f MiB  %.19s\n", width, name, hex,
		       (double)size / (1024.0 * 1024.0), created);
	}
	if (fflush(stdout) == EOF || ferror(stdout))
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

/* ---- inspect, rm, prune ------------------------------------------------------- */

static const char inspect_help[] =
    "usage: agentbox image inspect [OPTIONS] REF\n"
    "\n"
    "Show image REF as JSON: its name, digest, config_digest, size (of its\n"
    "blobs), unpacked_size (of its files), created, imported, its config (env,\n"
    "working_dir, user, entrypoint, cmd, os, architecture: the defaults of a\n"
    "sandbox of it) and its layers.\n" HELP_REF "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 shown; 125 agentbox or agentboxd failed or refused (one\n"
    "line on stderr; e.g. (not_found)).\n";

static int image_inspect(int argc, char **argv)
{
	const char *verb = "image inspect";
	struct opts o;
	int rc = parse_options(verb, inspect_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_fail("%s: give one REF (see agentbox %s --help)", verb, verb);
	if ((rc = check_ref(verb, argv[optind])) != 0)
		return rc;
	char target[CLIENT_TARGET_MAX];
	image_target(target, sizeof(target), argv[optind]);
	struct error err = {0};
	_cleanup_json_ json_t *image = NULL;
	if (call_once(o.socket_path, "GET", target, &image, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	return print_json(verb, image);
}

static const char rm_help[] =
    "usage: agentbox image rm [OPTIONS] REF...\n"
    "\n"
    "Remove each image REF names, printing each REF once done. By name, that\n"
    "name goes (the image with its last name); by digest, the image and every\n"
    "name of it. Its tree and the blobs no other image has go with it. An\n"
    "image a sandbox or task uses is refused (image_in_use); the others go on.\n" HELP_REF "\n"
    "options:\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 all removed; 125 one at least was not (a line on stderr\n"
    "each).\n";

static int image_rm(int argc, char **argv)
{
	const char *verb = "image rm";
	struct opts o;
	int rc = parse_options(verb, rm_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	return cli_delete_each(verb, "image names or digests", o.socket_path, optind, argc, argv,
			       check_ref, image_target);
}

static const char prune_help[] =
    "usage: agentbox image prune [OPTIONS]\n"
    "\n"
    "Remove the unnamed images no sandbox uses (a name that moved to another\n"
    "image leaves the old one unnamed), then every blob and tree no image\n"
    "names. Prints what went: images, blobs, trees, bytes, and what stays\n"
    "because it is in use.\n"
    "\n"
    "options:\n"
    "  --json          print agentboxd's answer as it came\n" CLIENT_HELP_SOCKET "\n"
    "exit status: 0 pruned; 125 agentbox or agentboxd failed or refused.\n";

static int image_prune(int argc, char **argv)
{
	const char *verb = "image prune";
	struct opts o;
	int rc = parse_options(verb, prune_help, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (optind < argc)
		return cli_fail("%s: unexpected argument '%s' (see agentbox %s --help)", verb,
				argv[optind], verb);
	struct error err = {0};
	_cleanup_json_ json_t *answer = NULL;
	if (call_once(o.socket_path, "POST", "/v1/images/prune", &answer, &err) < 0)
		return cli_fail("%s: %s", verb, err.msg);
	if (o.json)
		return print_json(verb, answer);
	printf("images %" JSON_INTEGER_FORMAT ", blobs %" JSON_INTEGER_FORMAT
	       ", trees %" JSON_INTEGER_FORMAT " removed; %" JSON_INTEGER_FORMAT
	       " bytes freed; %" JSON_INTEGER_FORMAT " in use\n",
	       json_integer_value(json_object_get(answer, "images_removed")),
	       json_integer_value(json_object_get(answer, "blobs_removed")),
	       json_integer_value(json_object_get(answer, "trees_removed")),
	       json_integer_value(json_object_get(answer, "bytes_freed")),
	       json_integer_value(json_object_get(answer, "in_use")));
	if (fflush(stdout) == EOF)
		return cli_fail("%s: cannot write the output", verb);
	return 0;
}

int verb_image(int argc, char **argv)
{
	static const struct verb commands[] = {
	    {"import", "import an image", image_import},
	    {"ls", "list images", image_ls},
	    {"inspect", "show an image", image_inspect},
	    {"rm", "remove images", image_rm},
	    {"prune", "remove what no image names", image_prune},
	    {"pull", "pull an image from a registry", image_pull},
	    {"export", "write an image out as an OCI layout tar", image_export},
	    {"bootstrap", "make a Debian base image", image_bootstrap},
	};
	return cli_dispatch("image", help, commands, ELEMENTSOF(commands), argc, argv);
}
