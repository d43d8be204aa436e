/*
 * store-audit.c - the contract of store.h's audit log, once for every
 * backend: the rows' limits (every string printable ASCII of at most
 * STORE_AUDIT_TEXT_MAX bytes, the row count bounded by the caller's
 * keep), the pruning batch, aggregation, and an audit write's commit,
 * which is not fsync'd of its own.
 */
#include "store/store.h"

#include "store/store-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void store_audit_release(struct audit_record *a)
{
	const char **text[] = {&a->tenant, &a->key_id, &a->method, &a->route,
			       &a->target, &a->error,  &a->source, &a->reason};
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
		free((char *)*text[i]);
		*text[i] = NULL;
	}
}

void store_audit_free(struct audit_record *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		store_audit_release(&v[i]);
	free(v);
}

/* NULL, or printable ASCII of at most STORE_AUDIT_TEXT_MAX bytes? */
static bool text_is_valid(const char *s)
{
	if (!s)
		return true;
	size_t n = strnlen(s, STORE_AUDIT_TEXT_MAX + 1);
	if (n > STORE_AUDIT_TEXT_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

static int check_record(const struct audit_record *a, size_t keep, struct error *err)
{
	if (!a)
		return error_set(err, EINVAL, "store: no audit row given");
	if (keep < 1 || keep > STORE_AUDIT_ROWS_MAX)
		return error_set(err, EINVAL, "store: the audit log keeps 1 to %d rows, not %zu",
				 STORE_AUDIT_ROWS_MAX, keep);
	if (a->status < 100 || a->status > 599)
		return error_set(err, EINVAL, "store: an audit row's status is %d", a->status);
	if (a->time < 0 || a->uid < -1)
		return error_set(err, EINVAL, "store: an audit row's time or uid is negative");
	const char *const text[] = {a->tenant, a->key_id, a->method, a->route,
				    a->target, a->error,  a->source, a->reason};
	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		if (!text_is_valid(text[i]))
			return error_set(err, EINVAL,
					 "store: an audit row's text is printable ASCII of at "
					 "most %d bytes",
					 STORE_AUDIT_TEXT_MAX);
	return 0;
}

/* A tenth of keep, at most STORE_AUDIT_PRUNE_BATCH, at least 1. */
static size_t prune_batch(size_t keep)
{
	size_t b = keep / 10;
	if (b > STORE_AUDIT_PRUNE_BATCH)
		b = STORE_AUDIT_PRUNE_BATCH;
	return b ? b : 1;
}

/*
 * One audit write in its own transaction, not fsync'd of its own; inside
 * a caller's transaction, a savepoint as every call (the caller's commit
 * decides).
 */
static int audit_write(struct store *st, const struct audit_record *a, int64_t window_start,
		       size_t keep, struct error *err)
{
	bool own = !st->in_tx;
	int r = own ? st->ops->set_sync(st, false, err) : 0;
	if (r == 0)
		r = st->ops->begin(st, st->in_tx, err);
	if (r == 0) {
		r = st->ops->audit_add(st, a, window_start, keep, prune_batch(keep), err);
		if (r < 0)
			st->ops->rollback(st, st->in_tx);
		else
			r = st->ops->commit(st, st->in_tx, err);
	}
	if (own) {
		struct error e = {0};
		int q = st->ops->set_sync(st, true, &e);
		if (q < 0 && r == 0)
			r = error_set(err, e.code, "%s", e.msg);
	}
	return r;
}

int store_audit_add(struct store *st, const struct audit_record *a, size_t keep, struct error *err)
{
	int r = check_record(a, keep, err);
	if (r < 0)
		return r;
	if (a->reason)
		return error_set(err, EINVAL, "store: an audit row with a reason is counted");
	return audit_write(st, a, -1, keep, err);
}

int store_audit_count(struct store *st, const struct audit_record *a, int64_t window_start,
		      size_t keep, struct error *err)
{
	int r = check_record(a, keep, err);
	if (r < 0)
		return r;
	if (!a->reason || !a->source)
		return error_set(err, EINVAL,
				 "store: a counted audit row needs a source and a "
				 "reason");
	if (window_start < 0 || window_start > a->time)
		return error_set(err, EINVAL, "store: an audit window starts at %lld, after %lld",
				 (long long)window_start, (long long)a->time);
	return audit_write(st, a, window_start, keep, err);
}

int store_audit_list(struct store *st, const struct audit_filter *f,
		     int (*fn)(const struct audit_record *a, void *data), void *data,
		     struct error *err)
{
	if (!f || !fn)
		return error_set(err, EINVAL,
				 "store: listing the audit log needs a filter and a "
				 "function");
	if (f->limit < 1 || f->limit > STORE_LIST_MAX)
		return error_set(err, EINVAL, "store: a list's limit is 1..%d", STORE_LIST_MAX);
	if (f->since < 0 || f->until < 0 || f->before_id < 0)
		return error_set(err, EINVAL, "store: an audit filter's bound is negative");
	if (!text_is_valid(f->tenant) || !text_is_valid(f->method))
		return error_set(err, EINVAL,
				 "store: an audit filter's tenant or method is not "
				 "a row's");
	if (f->route && strnlen(f->route, STORE_AUDIT_TEXT_MAX + 1) > STORE_AUDIT_TEXT_MAX)
		return error_set(err, EINVAL, "store: an audit filter's route passes %d bytes",
				 STORE_AUDIT_TEXT_MAX);
	struct audit_record *v = NULL;
	size_t n = 0;
	int r = st->ops->audit_list(st, f, &v, &n, err);
	/* fn runs after the backend is done reading, so it may call the store */
	for (size_t i = 0; r == 0 && i < n; i++) {
		int q = fn(&v[i], data);
		r = q < 0 ? q : 0;
	}
	store_audit_free(v, n);
	return r;
}
