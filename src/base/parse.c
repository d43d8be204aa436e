#include "base/parse.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Reads leading digits into *ret; returns how many were read, or -ERANGE. */
static int read_digits(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	int n = 0;
	for (; is_digit(s[n]); n++) {
		uint64_t d = (uint64_t)(s[n] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*ret = v;
	return n;
}

static int mul_checked(uint64_t a, uint64_t b, uint64_t *ret)
{
	if (b != 0 && a > UINT64_MAX / b)
		return -ERANGE;
	*ret = a * b;
	return 0;
}

int parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v;
	if (!s)
		return -EINVAL;
	int n = read_digits(s, &v);
	if (n < 0)
		return n;
	if (n == 0 || s[n] != '\0')
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_size(const char *s, uint64_t *ret_bytes)
{
	static const struct {
		const char *suffix;
		uint64_t factor;
	} units[] = {
	    {"", 1},
	    {"b", 1},
	    {"k", 1ULL << 10},
	    {"kb", 1ULL << 10},
	    {"kib", 1ULL << 10},
	    {"m", 1ULL << 20},
	    {"mb", 1ULL << 20},
	    {"mib", 1ULL << 20},
	    {"g", 1ULL << 30},
	    {"gb", 1ULL << 30},
	    {"gib", 1ULL << 30},
	    {"t", 1ULL << 40},
	    {"tb", 1ULL << 40},
	    {"tib", 1ULL << 40},
	};
	uint64_t v;
	if (!s)
		return -EINVAL;
	int n = read_digits(s, &v);
	if (n < 0)
		return n;
	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(s + n, units[i].suffix) == 0) {
			uint64_t bytes;
			int r = mul_checked(v, units[i].factor, &bytes);
			if (r < 0)
				return r;
			*ret_bytes = bytes;
			return 0;
		}
	}
	return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = {
	    /* "ms" before "m", so the longer unit wins */
	    {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
	};
	uint64_t total = 0;
	if (!s || !*s)
		return -EINVAL;
	const char *p = s;
	while (*p) {
		uint64_t v, part;
		int n = read_digits(p, &v);
		if (n < 0)
			return n;
		if (n == 0)
			return -EINVAL;
		p += n;
		if (*p == '\0' && p - n == s) { /* a bare number: seconds */
			if (mul_checked(v, 1000, &total) < 0)
				return -ERANGE;
			break;
		}
		size_t i;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t len = strlen(units[i].unit);
			if (strncmp(p, units[i].unit, len) == 0 &&
			    !(p[len] >= 'a' && p[len] <= 'z'))
				break;
		}
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		p += strlen(units[i].unit);
		if (mul_checked(v, units[i].ms, &part) < 0 || total > UINT64_MAX - part)
			return -ERANGE;
		total += part;
	}
	*ret_ms = total;
	return 0;
}

int parse_cpus_milli(const char *s, uint64_t *ret_milli)
{
	uint64_t whole, frac = 0, milli;
	if (!s)
		return -EINVAL;
	int n = read_digits(s, &whole);
	if (n < 0)
		return n;
	if (n == 0)
		return -EINVAL;
	const char *p = s + n;
	if (*p == '.') {
		p++;
		int digits = 0;
		while (is_digit(*p)) {
			if (digits == 3)
				return -EINVAL; /* finer than a thousandth of a CPU */
			frac = frac * 10 + (uint64_t)(*p - '0');
			digits++;
			p++;
		}
		if (digits == 0)
			return -EINVAL;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (*p != '\0')
		return -EINVAL;
	if (mul_checked(whole, 1000, &milli) < 0 || milli > UINT64_MAX - frac)
		return -ERANGE;
	*ret_milli = milli + frac;
	return 0;
}

bool env_name_is_valid(const char *name, size_t len)
{
	if (len == 0 || is_digit(name[0]))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || is_digit(c)))
			return false;
	}
	return true;
}

int parse_ipv4_port(const char *s, uint16_t dflt_port, uint32_t *ret_addr, uint16_t *ret_port)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);
	uint64_t port = dflt_port;
	struct in_addr a;
	if (n >= sizeof(host))
		return -EINVAL;
	if (colon && (parse_u64(colon + 1, &port) < 0 || port == 0 || port > 65535))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &a) != 1)
		return -EINVAL;
	*ret_addr = ntohl(a.s_addr);
	*ret_port = (uint16_t)port;
	return 0;
}

/* n digits at *p as a number; advances p. -1 when they are not digits. */
static int digits(const char **p, int n)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char ch = (*p)[i];
		if (ch < '0' || ch > '9')
			return -1;
		v = v * 10 + (ch - '0');
	}
	*p += n;
	return v;
}

int parse_rfc3339_ms(const char *s, int64_t *ret_ms)
{
	const char *p = s;
	struct tm tm = {0};
	int year, mon, day, hour, min, sec;
	if ((year = digits(&p, 4)) < 0 || *p++ != '-' || (mon = digits(&p, 2)) < 0 || *p++ != '-' ||
	    (day = digits(&p, 2)) < 0 || (*p != 'T' && *p != 't'))
		return -EINVAL;
	p++;
	if ((hour = digits(&p, 2)) < 0 || *p++ != ':' || (min = digits(&p, 2)) < 0 || *p++ != ':' ||
	    (sec = digits(&p, 2)) < 0)
		return -EINVAL;
	if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
		return -EINVAL;
	int64_t ms = 0;
	if (*p == '.') {
		p++;
		int n = 0, scale = 100;
		while (*p >= '0' && *p <= '9') {
			if (n < 3)
				ms += (*p - '0') * scale;
			scale /= 10;
			n++;
			p++;
		}
		if (n == 0)
			return -EINVAL;
	}
	int64_t offset = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1;
		int oh, om;
		if ((oh = digits(&p, 2)) < 0 || *p++ != ':' || (om = digits(&p, 2)) < 0 ||
		    oh > 23 || om > 59)
			return -EINVAL;
		offset = sign * (int64_t)(oh * 3600 + om * 60);
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	time_t t = timegm(&tm);
	*ret_ms = ((int64_t)t - offset) * 1000 + ms;
	return 0;
}
