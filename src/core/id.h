/*
 * id.h - the ids of the domain model: a prefix naming the kind of thing
 * ("tsk_" for a task, "sbx_" for a sandbox) and 26 random characters of
 * Crockford's base32 (130 bits), lower case. task.c and sandbox.c wrap
 * these with their own prefix; the API checks ids before any lookup, so
 * an id is always safe in a path, a URL or a log line.
 */
#ifndef AGENTBOX_CORE_ID_H
#define AGENTBOX_CORE_ID_H

#include <stdbool.h>
#include <stddef.h>

/* Random characters after the prefix. */
#define ID_RANDOM_CHARS 26

/* An input's (POST /v1/inputs): "inp_" + 26 characters, and its size with the NUL. */
#define INPUT_ID_PREFIX "inp_"
#define INPUT_ID_SIZE	32

/*
 * Write prefix + ID_RANDOM_CHARS random base32 characters + NUL into
 * id[0..size). 0, -EINVAL if that does not fit in size, or the -errno of
 * getrandom().
 */
int id_new(const char *prefix, char *id, size_t size);

/* Is s exactly prefix + ID_RANDOM_CHARS base32 characters? */
bool id_is_valid(const char *prefix, const char *s);

#endif
