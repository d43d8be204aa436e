/*
 * errors.c - the one table of API errors: stable name and HTTP status,
 * and the error response every failure becomes.
 */
#include "api/api-internal.h"
#include "base/parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int status;
} table[API_ERR_COUNT] = {
    [API_ERR_INVALID_JSON] = {"invalid_json", 400},
    [API_ERR_INVALID_FIELD] = {"invalid_field", 400},
    [API_ERR_MISSING_FIELD] = {"missing_field", 400},
    [API_ERR_UNKNOWN_FIELD] = {"unknown_field", 400},
    [API_ERR_INVALID_ID] = {"invalid_id", 400},
    [API_ERR_BODY_TOO_LARGE] = {"body_too_large", 413},
    [API_ERR_NOT_FOUND] = {"not_found", 404},
    [API_ERR_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405},
    [API_ERR_CONFLICT] = {"conflict", 409},
    [API_ERR_UNAUTHORIZED] = {"unauthorized", 401},
    [API_ERR_FORBIDDEN] = {"forbidden", 403},
    [API_ERR_UNSUPPORTED_MEDIA_TYPE] = {"unsupported_media_type", 415},
    [API_ERR_INTERNAL] = {"internal", 500},
    [API_ERR_SANDBOX_ENDED] = {"sandbox_ended", 409},
    [API_ERR_SANDBOX_PAUSED] = {"sandbox_paused", 409},
    [API_ERR_SANDBOX_FAILED] = {"sandbox_failed", 503},
    [API_ERR_TOO_MANY_PROCESSES] = {"too_many_processes", 429},
    [API_ERR_PROCESS_NOT_FOUND] = {"process_not_found", 404},
    [API_ERR_PROCESS_ENDED] = {"process_ended", 409},
    [API_ERR_FILE_NOT_FOUND] = {"file_not_found", 404},
    [API_ERR_PERMISSION_DENIED] = {"permission_denied", 403},
    [API_ERR_NOT_A_FILE] = {"not_a_file", 400},
    [API_ERR_FILE_TOO_LARGE] = {"file_too_large", 413},
    [API_ERR_NO_SPACE] = {"no_space", 507},
    [API_ERR_TOO_MANY_REQUESTS] = {"too_many_requests", 429},
    [API_ERR_HOST_FULL] = {"host_full", 503},
    [API_ERR_QUEUE_FULL] = {"queue_full", 503},
    [API_ERR_BUSY] = {"busy", 503},
    [API_ERR_QUOTA_EXCEEDED] = {"quota_exceeded", 429},
    [API_ERR_NETWORK_UNAVAILABLE] = {"network_unavailable", 503},
    [API_ERR_RATE_LIMITED] = {"rate_limited", 429},
    [API_ERR_INVALID_IMAGE] = {"invalid_image", 400},
    [API_ERR_IMAGE_IN_USE] = {"image_in_use", 409},
    [API_ERR_REGISTRY] = {"registry_error", 502},
    [API_ERR_BOOTSTRAP_FAILED] = {"bootstrap_failed", 502},
    [API_ERR_BAD_HANDSHAKE] = {"bad_handshake", 400},
    [API_ERR_TOO_MANY_INPUTS] = {"too_many_inputs", 429},
};

const char *api_error_name(enum api_error_code code)
{
	return (unsigned)code < API_ERR_COUNT ? table[code].name : NULL;
}

int api_error_status(enum api_error_code code)
{
	return (unsigned)code < API_ERR_COUNT ? table[code].status : 500;
}

int api_error_set(struct api_error *e, enum api_error_code code, const char *field, const char *fmt,
		  ...)
{
	if (!e)
		return -EINVAL;
	e->code = code;
	snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	e->log[0] = '\0';
	e->extra[0] = '\0';
	return -EINVAL;
}

int api_error_internal(struct api_error *e, int errnum, const char *log)
{
	if (!e)
		return -EIO;
	e->code = API_ERR_INTERNAL;
	e->field[0] = '\0';
	e->extra[0] = '\0';
	snprintf(e->message, sizeof(e->message), "internal error");
	snprintf(e->log, sizeof(e->log), "%s (%s)", log && *log ? log : "internal error",
		 strerror(errnum > 0 ? errnum : EIO));
	return -EIO;
}

/* Keys longer than this are cut (on a UTF-8 boundary) and marked "...". */
#define FIELD_KEY_SHOWN 160

void api_field_key(char out[API_FIELD_MAX], const char *parent, const char *key)
{
	size_t plen = strnlen(parent, API_FIELD_MAX - 1);
	if (env_name_is_valid(key, strlen(key)) && strlen(key) <= FIELD_KEY_SHOWN) {
		snprintf(out, API_FIELD_MAX, "%.*s%s%s", (int)plen, parent, plen ? "." : "", key);
		return;
	}
	size_t klen = strlen(key), shown = klen;
	if (shown > FIELD_KEY_SHOWN) {
		shown = FIELD_KEY_SHOWN;
		while (shown > 0 && ((unsigned char)key[shown] & 0xc0) == 0x80)
			shown--; /* do not cut a character in two */
	}
	struct buf b = {.max = API_FIELD_MAX - 8};
	buf_append(&b, parent, plen);
	buf_append(&b, "[", 1);
	json_put_str(&b, key, shown);
	if (shown < klen)
		buf_puts(&b, "...");
	buf_append(&b, "]", 1);
	snprintf(out, API_FIELD_MAX, "%s", b.failed ? parent : b.data);
	buf_release(&b);
}

void api_field_index(char out[API_FIELD_MAX], const char *parent, size_t index)
{
	snprintf(out, API_FIELD_MAX, "%s[%zu]", parent, index);
}

int api_error_respond(const struct api_error *e, struct api_response *ret)
{
	struct buf b = {0};
	buf_puts(&b, "{\"error\":{\"code\":");
	json_put_strz(&b, api_error_name(e->code) ? api_error_name(e->code) : "internal");
	buf_puts(&b, ",\"message\":");
	json_put_strz(&b, e->message);
	if (e->field[0]) {
		buf_puts(&b, ",\"field\":");
		json_put_strz(&b, e->field);
	}
	if (e->extra[0]) {
		buf_puts(&b, ",");
		buf_puts(&b, e->extra);
	}
	buf_puts(&b, "}}");
	free(ret->body);
	ret->body = NULL;
	ret->body_len = 0;
	ret->status = api_error_status(e->code);
	ret->content_type = API_JSON;
	if (e->code == API_ERR_INTERNAL)
		snprintf(ret->log, sizeof(ret->log), "%s", e->log);
	return buf_steal(&b, &ret->body, &ret->body_len);
}
