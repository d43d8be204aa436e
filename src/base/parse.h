/*
 * parse.h - strict parsers for the values a user types.
 *
 * Every parser accepts the whole string or nothing: trailing garbage,
 * signs, empty strings and overflow are errors (-EINVAL or -ERANGE), and
 * *ret is written only on success. No locale is consulted.
 */
#ifndef AGENTBOX_BASE_PARSE_H
#define AGENTBOX_BASE_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal unsigned integer: "0", "42". No sign, no spaces. */
int parse_u64(const char *s, uint64_t *ret);

/*
 * Size in bytes: a whole number with an optional binary unit, case-
 * insensitive: "4096", "64k", "512m", "1g", "2t"; "m", "mb" and "mib"
 * all mean 2^20. "12xb" is -EINVAL.
 */
int parse_size(const char *s, uint64_t *ret_bytes);

/*
 * Duration: one or more number+unit groups, units ms, s, m, h, d:
 * "500ms", "90s", "2h", "1h30m". A bare number means seconds.
 */
int parse_duration_ms(const char *s, uint64_t *ret_ms);

/*
 * A moment in RFC 3339, "2024-05-01T12:00:00.123Z" or with an offset
 * ("+02:00"), as ms since the epoch (digits past the millisecond are
 * dropped). The API's times, and what it takes back.
 */
int parse_rfc3339_ms(const char *s, int64_t *ret_ms);

/* CPU count with at most three decimals: "1", "0.5", "2.25" -> 2250. */
int parse_cpus_milli(const char *s, uint64_t *ret_milli);

/*
 * An IPv4 address with an optional port: "192.0.2.53", "192.0.2.53:5353".
 * The address is dotted-quad (inet_pton's), the port 1..65535; without
 * one, *ret_port is dflt_port. The address in host byte order.
 */
int parse_ipv4_port(const char *s, uint16_t dflt_port, uint32_t *ret_addr, uint16_t *ret_port);

/*
 * Is name[0..len) a portable environment variable name,
 * [A-Za-z_][A-Za-z0-9_]* (POSIX's, and a C identifier)? The one check of
 * every env name a user gives (--env, a request's env), and of a key that
 * may be shown bare after a '.'.
 */
bool env_name_is_valid(const char *name, size_t len);

#endif
