/*
 * tar-check.c - the checker of a tar from agentboxd (tar-check.h).
 */
#include "cli/tar-check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void tar_check_init(struct tar_check *t)
{
	memset(t, 0, sizeof(*t));
}

/* Is name relative, with no ".." component (and not empty)? */
static bool name_is_safe(const char *name, size_t len)
{
	if (len == 0 || name[0] == '/' || memchr(name, '\0', len))
		return false;
	for (size_t i = 0; i < len;) {
		size_t k = 0;
		while (i + k < len && name[i + k] != '/')
			k++;
		if (k == 2 && name[i] == '.' && name[i + 1] == '.')
			return false;
		i += k + 1;
	}
	return true;
}

/* An octal field of the header; false when it is not one (base-256 included). */
static bool octal(const unsigned char *f, size_t n, uint64_t *ret)
{
	size_t i = 0;
	uint64_t v = 0;
	while (i < n && f[i] == ' ')
		i++;
	size_t digits = 0;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
		if (v > (UINT64_MAX >> 3))
			return false;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return false;
	*ret = v;
	return digits > 0;
}

static bool checksum_ok(const unsigned char *b)
{
	uint64_t want;
	if (!octal(b + 148, 8, &want))
		return false;
	uint64_t sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += (i >= 148 && i < 156) ? ' ' : b[i];
	return sum == want;
}

static int refuse(struct error *err, const char *what, const char *name, size_t len)
{
	return error_set(err, EPROTO, "agentboxd sent a tar with %s%s%.*s%s", what,
			 name ? " '" : "", (int)(len > 200 ? 200 : len), name ? name : "",
			 name ? "'" : "");
}

/* A pax header's records in t->meta: well-formed, and none we refuse. */
static int check_pax(struct tar_check *t, struct error *err)
{
	const char *p = t->meta, *end = t->meta + t->meta_len;
	while (p < end) {
		size_t len = 0;
		const char *q = p;
		while (q < end && *q >= '0' && *q <= '9' && len < TAR_CHECK_META_MAX)
			len = len * 10 + (size_t)(*q++ - '0');
		if (q == p || q >= end || *q != ' ' || len > (size_t)(end - p) ||
		    p[len - 1] != '\n')
			return refuse(err, "a malformed pax header", NULL, 0);
		const char *key = q + 1, *rec_end = p + len - 1;
		const char *eq = memchr(key, '=', (size_t)(rec_end - key));
		if (!eq)
			return refuse(err, "a malformed pax header", NULL, 0);
		size_t klen = (size_t)(eq - key);
		const char *val = eq + 1;
		size_t vlen = (size_t)(rec_end - val);
		if ((klen == 4 && memcmp(key, "size", 4) == 0) ||
		    (klen == 8 && memcmp(key, "linkpath", 8) == 0) ||
		    (klen >= 10 && memcmp(key, "GNU.sparse", 10) == 0))
			return refuse(err, "a pax header it does not take:", key, klen);
		if (klen == 4 && memcmp(key, "path", 4) == 0) {
			if (!name_is_safe(val, vlen))
				return refuse(
				    err, "a member name that is absolute or has '..':", val, vlen);
			t->named = true;
		}
		p += len;
	}
	return 0;
}

/* The whole header in t->block. */
static int header(struct tar_check *t, struct error *err)
{
	static const unsigned char zero[512];
	if (memcmp(t->block, zero, sizeof(zero)) == 0) {
		t->ended = true;
		return 0;
	}
	if (!checksum_ok(t->block))
		return refuse(err, "a header that is not a tar's", NULL, 0);
	uint64_t size;
	if (!octal(t->block + 124, 12, &size))
		return refuse(err, "a member size it does not take", NULL, 0);
	char type = (char)t->block[156];
	char name[257];
	size_t n = 0;
	if (memcmp(t->block + 257, "ustar", 5) == 0 && t->block[345]) {
		n = strnlen((const char *)t->block + 345, 155);
		memcpy(name, t->block + 345, n);
		name[n++] = '/';
	}
	size_t k = strnlen((const char *)t->block, 100);
	memcpy(name + n, t->block, k);
	n += k;
	if (type == 'x' || type == 'L') {
		if (size > TAR_CHECK_META_MAX)
			return refuse(err, "a pax header or long name over 64 KiB", NULL, 0);
		t->meta_type = type;
		t->meta_len = 0;
	} else if (type == '0' || type == '\0' || type == '5') {
		if (!t->named && !name_is_safe(name, n))
			return refuse(err, "a member name that is absolute or has '..':", name, n);
		t->named = false;
		if (type == '5')
			size = 0; /* a directory has no data, whatever its size says */
	} else {
		const char *what = type == '1' ? "a hard link:"
				   : type == '2'
				       ? "a symlink:"
				       : "a member that is not a regular file or directory:";
		return refuse(err, what, name, n);
	}
	t->data = size;
	t->pad = (512 - size % 512) % 512;
	return 0;
}

int tar_check_feed(struct tar_check *t, const char *buf, size_t len, struct error *err)
{
	while (len > 0 && !t->ended) {
		if (t->data > 0) {
			size_t take = t->data < len ? (size_t)t->data : len;
			if (t->meta_type) {
				memcpy(t->meta + t->meta_len, buf, take);
				t->meta_len += take;
			}
			t->data -= take;
			buf += take;
			len -= take;
			continue;
		}
		if (t->pad > 0) {
			size_t take = t->pad < len ? (size_t)t->pad : len;
			t->pad -= take;
			buf += take;
			len -= take;
			continue;
		}
		if (t->meta_type) {
			t->meta[t->meta_len] = '\0';
			if (t->meta_type == 'L') {
				size_t n = strnlen(t->meta, t->meta_len);
				if (!name_is_safe(t->meta, n))
					return refuse(err,
						      "a member name that is absolute or has '..':",
						      t->meta, n);
				t->named = true;
			} else {
				int r = check_pax(t, err);
				if (r < 0)
					return r;
			}
			t->meta_type = 0;
		}
		size_t take = sizeof(t->block) - t->have < len ? sizeof(t->block) - t->have : len;
		memcpy(t->block + t->have, buf, take);
		t->have += take;
		buf += take;
		len -= take;
		if (t->have == sizeof(t->block)) {
			t->have = 0;
			int r = header(t, err);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

bool tar_check_done(const struct tar_check *t)
{
	return t->ended;
}
