/*
 * intercept-ca.c - the CA on disk, and the certificates it issues. See
 * intercept.h (intercept_ca_ensure()) and intercept-internal.h.
 */
#include "network/intercept-internal.h"
#include "network/intercept.h"

#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CA_FILE_MAX   (64 << 10) /* ca.key, ca.pem: a few hundred bytes each */
#define SERIAL_BITS   127	 /* random, positive, within RFC 5280's 20 bytes */
#define CN_MAX	      64	 /* ub-common-name */
#define CA_BACKDATE_S 3600

int ssl_error(struct error *err, int code, const char *fmt, ...)
{
	char msg[ERROR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	unsigned long e = ERR_peek_last_error();
	char why[256];
	if (e)
		ERR_error_string_n(e, why, sizeof(why));
	ERR_clear_error();
	return e ? error_set(err, code, "%s: %s", msg, why) : error_set_errno(err, code, "%s", msg);
}

static int add_ext(X509 *x, X509V3_CTX *v, int nid, const char *value)
{
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, v, nid, value);
	int ok = e && X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok ? 0 : -EINVAL;
}

static int cert_build(X509 *x, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, bool ca,
		      const char *name, long from, long until)
{
	BIGNUM *serial = BN_new();
	int ok = serial && BN_rand(serial, SERIAL_BITS, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
		 BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x));
	BN_free(serial);
	if (!ok || !X509_set_version(x, X509_VERSION_3) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), from) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), until) || !X509_set_pubkey(x, key))
		return -EINVAL;
	X509_NAME *subject = X509_get_subject_name(x);
	if (strlen(name) <= CN_MAX &&
	    !X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)name,
					-1, -1, 0))
		return -EINVAL;
	if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : subject))
		return -EINVAL;
	X509V3_CTX v;
	X509V3_set_ctx(&v, issuer ? issuer : x, x, NULL, NULL, 0);
	char san[8 + 256];
	snprintf(san, sizeof(san), "DNS:%s", name);
	if ((ca ? add_ext(x, &v, NID_basic_constraints, "critical,CA:TRUE") ||
		      add_ext(x, &v, NID_key_usage, "critical,keyCertSign,cRLSign")
		: add_ext(x, &v, NID_basic_constraints, "critical,CA:FALSE") ||
		      add_ext(x, &v, NID_key_usage, "critical,digitalSignature") ||
		      add_ext(x, &v, NID_ext_key_usage, "serverAuth") ||
		      add_ext(x, &v, NID_subject_alt_name, san)) ||
	    add_ext(x, &v, NID_subject_key_identifier, "hash") ||
	    add_ext(x, &v, NID_authority_key_identifier, "keyid:always"))
		return -EINVAL;
	return X509_sign(x, issuer_key, EVP_sha256()) > 0 ? 0 : -EINVAL;
}

int cert_issue(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, bool ca, const char *name,
	       long from, long until, X509 **ret, struct error *err)
{
	X509 *x = X509_new();
	if (!x)
		return ssl_error(err, ENOMEM, "certificate for %s", name);
	if (cert_build(x, key, issuer, issuer_key ? issuer_key : key, ca, name, from, until) < 0) {
		X509_free(x);
		return ssl_error(err, EINVAL, "certificate for %s", name);
	}
	*ret = x;
	return 0;
}

/* ---- files ------------------------------------------------------------------ */

/* name under dirfd, whole, at most max bytes: 0, -ENOENT, -EFBIG, -errno. */
static int file_read(int dirfd, const char *name, int flags, size_t max, struct buf *out)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | flags);
	if (fd < 0)
		return -errno;
	char chunk[8192];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return out->failed;
		if (out->len + (size_t)n > max)
			return -EFBIG;
		buf_append(out, chunk, (size_t)n);
	}
}

/* Replace name under dirfd with data, atomically and durably, with mode. */
static int file_replace(int dirfd, const char *dir, const char *name, const void *data, size_t len,
			mode_t mode, struct error *err)
{
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
		return error_set_errno(err, errno, "%s/%s", dir, tmp);
	_cleanup_close_ int fd =
	    openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	int r;
	if (fd < 0)
		return error_set_errno(err, errno, "%s/%s", dir, tmp);
	if (fchmod(fd, mode) < 0 || (r = write_all(fd, data, len)) < 0 || fsync(fd) < 0 ||
	    renameat(dirfd, tmp, dirfd, name) < 0 || fsync(dirfd) < 0) {
		r = errno;
		(void)unlinkat(dirfd, tmp, 0);
		return error_set_errno(err, r, "writing %s/%s", dir, name);
	}
	return 0;
}

static int pem_of(bool key, void *obj, struct buf *out)
{
	BIO *b = BIO_new(BIO_s_mem());
	int ok = b && (key ? PEM_write_bio_PrivateKey(b, obj, NULL, NULL, 0, NULL, NULL)
			   : PEM_write_bio_X509(b, obj));
	char *p;
	long n = ok ? BIO_get_mem_data(b, &p) : 0;
	if (ok && n > 0)
		buf_append(out, p, (size_t)n);
	BIO_free(b);
	ERR_clear_error();
	return !ok || n <= 0 ? -ENOMEM : out->failed;
}

/* A CA directory, open: the key's, and its public subdirectory. */
struct ca_dirs {
	int fd, pub;
	const char *path;
	char pubpath[4096];
};

static void ca_dirs_close(struct ca_dirs *d)
{
	CLOSE_FD(d->fd);
	CLOSE_FD(d->pub);
}

/* Open dir and dir/INTERCEPT_CA_PUBLIC; create both (0755) when create says so. */
static int ca_dirs_open(struct ca_dirs *d, const char *dir, bool create, struct error *err)
{
	*d = (struct ca_dirs){.fd = -1, .pub = -1, .path = dir};
	snprintf(d->pubpath, sizeof(d->pubpath), "%s/%s", dir, INTERCEPT_CA_PUBLIC);
	if (create) {
		/* made here: 0755 whatever the umask (an existing one is left as it is) */
		int r = mkdir(dir, 0755) == 0 ? chmod(dir, 0755) : errno == EEXIST ? 0 : -1;
		if (r < 0)
			return error_set_errno(err, errno, "CA directory %s", dir);
	}
	d->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0)
		return error_set_errno(err, errno, "CA directory %s", dir);
	/* the sandbox's user reads what is mounted from here: whatever the umask */
	if (create && ((mkdirat(d->fd, INTERCEPT_CA_PUBLIC, 0755) < 0 && errno != EEXIST) ||
		       fchmodat(d->fd, INTERCEPT_CA_PUBLIC, 0755, 0) < 0))
		return error_set_errno(err, errno, "%s", d->pubpath);
	d->pub =
	    openat(d->fd, INTERCEPT_CA_PUBLIC, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d->pub < 0)
		return error_set_errno(err, errno, "%s", d->pubpath);
	return 0;
}

static int ca_make(struct ca_dirs *d, struct error *err)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *cert = NULL;
	_cleanup_buf_ struct buf kpem = {0}, cpem = {0};
	int r = key ? cert_issue(key, NULL, NULL, true, INTERCEPT_CA_NAME, -CA_BACKDATE_S,
				 (long)INTERCEPT_CA_DAYS * 86400, &cert, err)
		    : ssl_error(err, ENOMEM, "CA key");
	if (r == 0 && (pem_of(true, key, &kpem) < 0 || pem_of(false, cert, &cpem) < 0))
		r = error_set(err, ENOMEM, "CA: out of memory");
	/* the key first: the certificate is what says a CA is there */
	if (r == 0)
		r = file_replace(d->fd, d->path, INTERCEPT_CA_KEY, kpem.data, kpem.len, 0600, err);
	if (r == 0)
		r = file_replace(d->pub, d->pubpath, INTERCEPT_CA_CERT, cpem.data, cpem.len, 0644,
				 err);
	if (kpem.data)
		OPENSSL_cleanse(kpem.data, kpem.len);
	EVP_PKEY_free(key);
	X509_free(cert);
	return r;
}

static int ca_read(const struct ca_dirs *d, EVP_PKEY **ret_key, X509 **ret_cert, struct error *err)
{
	_cleanup_buf_ struct buf kpem = {0}, cpem = {0};
	int r = file_read(d->fd, INTERCEPT_CA_KEY, O_NOFOLLOW, CA_FILE_MAX, &kpem);
	if (r < 0)
		return error_set_errno(err, -r, "%s/%s", d->path, INTERCEPT_CA_KEY);
	if ((r = file_read(d->pub, INTERCEPT_CA_CERT, O_NOFOLLOW, CA_FILE_MAX, &cpem)) < 0) {
		OPENSSL_cleanse(kpem.data, kpem.len);
		return error_set_errno(err, -r, "%s/%s", d->pubpath, INTERCEPT_CA_CERT);
	}
	BIO *kb = BIO_new_mem_buf(kpem.data, (int)kpem.len);
	BIO *cb = BIO_new_mem_buf(cpem.data, (int)cpem.len);
	EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	X509 *cert = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	BIO_free(kb);
	BIO_free(cb);
	OPENSSL_cleanse(kpem.data, kpem.len);
	if (!key || !cert || !X509_check_private_key(cert, key)) {
		EVP_PKEY_free(key);
		X509_free(cert);
		return ssl_error(err, EINVAL, "%s: %s and %s/%s are not a CA's key and certificate",
				 d->path, INTERCEPT_CA_KEY, INTERCEPT_CA_PUBLIC, INTERCEPT_CA_CERT);
	}
	*ret_key = key;
	*ret_cert = cert;
	return 0;
}

int ca_load(const char *dir, EVP_PKEY **ret_key, X509 **ret_cert, struct error *err)
{
	_cleanup_(ca_dirs_close) struct ca_dirs d;
	int r = ca_dirs_open(&d, dir, false, err);
	return r < 0 ? r : ca_read(&d, ret_key, ret_cert, err);
}

int intercept_ca_ensure(const char *dir, const char *system_bundle, struct error *err)
{
	_cleanup_(ca_dirs_close) struct ca_dirs d;
	int r = ca_dirs_open(&d, dir, true, err);
	if (r < 0)
		return r;
	if (faccessat(d.pub, INTERCEPT_CA_CERT, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return error_set_errno(err, errno, "%s/%s", d.pubpath, INTERCEPT_CA_CERT);
		if ((r = ca_make(&d, err)) < 0)
			return r;
	}
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	if ((r = ca_read(&d, &key, &cert, err)) < 0)
		return r;
	EVP_PKEY_free(key);
	_cleanup_buf_ struct buf bundle = {0};
	/* NULL: where this OpenSSL looks for the system's roots itself */
	if (!system_bundle)
		system_bundle = X509_get_default_cert_file();
	if (system_bundle) {
		r = file_read(AT_FDCWD, system_bundle, 0, INTERCEPT_SYSTEM_BUNDLE_MAX, &bundle);
		if (r < 0 && r != -ENOENT) {
			X509_free(cert);
			return error_set_errno(err, -r, "system bundle %s", system_bundle);
		}
		if (bundle.len && bundle.data[bundle.len - 1] != '\n')
			buf_append(&bundle, "\n", 1);
	}
	r = pem_of(false, cert, &bundle);
	X509_free(cert);
	if (r < 0)
		return error_set(err, -r, "%s: out of memory", INTERCEPT_CA_BUNDLE);
	return file_replace(d.pub, d.pubpath, INTERCEPT_CA_BUNDLE, bundle.data, bundle.len, 0644,
			    err);
}
