/*
 * json-cleanup.h - scope-bound ownership of jansson values, in the manner
 * of cleanup.h.
 *
 * A json_t * declared _cleanup_json_ owns one reference: json_decref()
 * drops it when the variable leaves scope. TAKE_PTR() hands the reference
 * on (the variable becomes NULL and nothing is dropped). A borrowed value
 * (json_object_get(), json_array_get()) must not be declared so.
 *
 *	_cleanup_json_ json_t *v = json_loads(text, 0, NULL);
 *	if (!json_is_object(v))
 *		return -EINVAL;
 *	...
 *	*ret = TAKE_PTR(v);
 *
 * Header-only: base itself never links jansson. Only components that
 * already use jansson include this.
 */
#ifndef AGENTBOX_BASE_JSON_CLEANUP_H
#define AGENTBOX_BASE_JSON_CLEANUP_H

#include "base/cleanup.h"

#include <errno.h>
#include <jansson.h>

/*
 * Drop *p's reference, if any. Unlike jansson's own json_decrefp() (behind
 * its json_auto_t), errno is kept, as cleanup.h's destructors keep it.
 */
static inline void cleanup_json_decrefp(json_t **p)
{
	if (*p) {
		int saved = errno;
		json_decref(*p);
		errno = saved;
	}
}

#define _cleanup_json_ _cleanup_(cleanup_json_decrefp)

#endif
