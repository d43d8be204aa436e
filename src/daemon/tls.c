/*
 * tls.c - --tls-cert and --tls-key: the TCP listener's certificate chain
 * and private key, read whole at the start (daemon.h, struct daemon_tls)
 * and handed to libmicrohttpd (server.c), which parses them with GnuTLS.
 */
#include "daemon/daemon.h"

#include "base/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * path into a malloc'd NUL-terminated buffer of at most
 * DAEMON_TLS_FILE_MAX bytes; opt names the option in messages. A file
 * that holds no PEM block is refused here, with the option's name, rather
 * than by GnuTLS later. 0 or -errno with err.
 */
static int read_pem(const char *opt, const char *path, char **ret, size_t *ret_len,
		    struct stat *ret_st, struct error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0)
		return error_set_errno(err, errno, "%s %s", opt, path);
	if (fstat(fd, &st) < 0)
		return error_set_errno(err, errno, "%s %s", opt, path);
	if (!S_ISREG(st.st_mode))
		return error_set(err, EINVAL, "%s %s: not a regular file", opt, path);
	if (st.st_size > DAEMON_TLS_FILE_MAX)
		return error_set(err, EFBIG, "%s %s: larger than %u KiB", opt, path,
				 DAEMON_TLS_FILE_MAX >> 10);
	size_t cap = (size_t)st.st_size + 1;
	char *buf = malloc(cap);
	if (!buf)
		return error_set_errno(err, ENOMEM, "%s %s", opt, path);
	size_t len = 0;
	while (len < cap - 1) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : 0;
			if (!e)
				break; /* shorter than it said: what is there is checked below */
			explicit_bzero(buf, cap);
			free(buf);
			return error_set_errno(err, e, "%s %s", opt, path);
		}
		len += (size_t)n;
	}
	buf[len] = '\0';
	/* a NUL inside would cut it for libmicrohttpd, which takes C strings */
	if (strlen(buf) != len || !strstr(buf, "-----BEGIN ")) {
		explicit_bzero(buf, cap);
		free(buf);
		return error_set(err, EINVAL, "%s %s: not a PEM file (no '-----BEGIN ' line)", opt,
				 path);
	}
	*ret = buf;
	*ret_len = len;
	*ret_st = st;
	return 0;
}

int daemon_tls_load(const char *cert_path, const char *key_path, struct daemon_tls *ret,
		    struct error *err)
{
	struct daemon_tls t = {0};
	struct stat st;
	size_t len;
	int r = read_pem("--tls-cert", cert_path, &t.cert, &len, &st, err);
	if (r < 0)
		return r;
	r = read_pem("--tls-key", key_path, &t.key, &t.key_len, &st, err);
	if (r < 0) {
		daemon_tls_release(&t);
		return r;
	}
	if (!strstr(t.key, "PRIVATE KEY-----")) {
		daemon_tls_release(&t);
		return error_set(err, EINVAL, "--tls-key %s: holds no private key", key_path);
	}
	t.key_exposed = (st.st_mode & 077) != 0;
	t.key_mode = st.st_mode & 07777;
	*ret = t;
	return 0;
}

void daemon_tls_forget_key(struct daemon_tls *t)
{
	if (t && t->key) {
		explicit_bzero(t->key, t->key_len);
		free(t->key);
		t->key = NULL;
		t->key_len = 0;
	}
}

void daemon_tls_release(struct daemon_tls *t)
{
	if (!t)
		return;
	daemon_tls_forget_key(t);
	free(t->cert);
	t->cert = NULL;
}

int daemon_tls_configure(struct daemon_config *cfg, struct error *err)
{
	if (!cfg->tls_cert && !cfg->tls_key)
		return 0;
	if (!cfg->tls_cert || !cfg->tls_key)
		return error_set(err, EINVAL, "%s needs %s too: a certificate goes with its key",
				 cfg->tls_cert ? "--tls-cert" : "--tls-key",
				 cfg->tls_cert ? "--tls-key" : "--tls-cert");
	if (!cfg->listen)
		return error_set(err, EINVAL,
				 "--tls-cert and --tls-key are for --listen ADDR:PORT (the unix "
				 "socket serves no TLS)");
	int r = daemon_tls_load(cfg->tls_cert, cfg->tls_key, &cfg->tls, err);
	if (r < 0)
		return r;
	if (cfg->tls.key_exposed)
		fprintf(stderr,
			"agentboxd: warning: --tls-key %s is mode %04o: anyone in its group "
			"or beyond who can read it can pose as this server (chmod 600 it)\n",
			cfg->tls_key, cfg->tls.key_mode);
	return 0;
}
