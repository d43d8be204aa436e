/*
 * endpoint.c - where the server is (http-client.h): a unix socket's path,
 * HOST:PORT, or a URL (http://, https://, unix:).
 */
#include "client/http-client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* A control character other than HTAB (CR and LF included), or DEL. */
static bool has_ctl(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char u = (unsigned char)s[i];
		if ((u < 0x20 && u != '\t') || u == 0x7f)
			return true;
	}
	return false;
}

static int parse_port(const char *s, char out[8])
{
	size_t n = strlen(s);
	if (n == 0 || n > 5)
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	snprintf(out, 8, "%u", v);
	return 0;
}

static bool host_is_numeric(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

int http_endpoint_unix(const char *path, struct http_endpoint *ret, struct error *err)
{
	struct http_endpoint ep = {.transport = HTTP_UNIX};
	if (!path || !*path)
		return error_set(err, EINVAL, "an empty socket path");
	if (has_ctl(path, strlen(path)))
		return error_set(err, EINVAL, "the socket path holds control characters");
	if (strlen(path) >= sizeof(ep.path))
		return error_set(err, ENAMETOOLONG, "socket path '%s' is longer than %zu bytes",
				 path, sizeof(ep.path) - 1);
	snprintf(ep.path, sizeof(ep.path), "%s", path);
	snprintf(ep.name, sizeof(ep.name), "%s", path);
	*ret = ep;
	return 0;
}

int http_endpoint_parse(const char *s, struct http_endpoint *ret, struct error *err)
{
	struct http_endpoint ep = {0};
	if (!s || !*s)
		return error_set(err, EINVAL, "an empty address (want a socket path or HOST:PORT)");
	if (strlen(s) >= sizeof(ep.name))
		return error_set(err, ENAMETOOLONG, "the address is longer than %zu bytes",
				 sizeof(ep.name) - 1);
	if (has_ctl(s, strlen(s)))
		return error_set(err, EINVAL, "the address holds control characters");
	snprintf(ep.name, sizeof(ep.name), "%s", s);

	if (s[0] == '/')
		return http_endpoint_unix(s, ret, err);

	const char *host, *port;
	size_t hlen;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return error_set(err, EINVAL, "'%s' is not [IPV6]:PORT", s);
		host = s + 1;
		hlen = (size_t)(close - host);
		port = close + 2;
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon)
			return error_set(err, EINVAL,
					 "'%s' is neither a socket path (/...) nor HOST:PORT", s);
		host = s;
		hlen = (size_t)(colon - s);
		if (memchr(host, ':', hlen))
			return error_set(err, EINVAL,
					 "'%s': an IPv6 address goes in brackets, as [::1]:PORT",
					 s);
		port = colon + 1;
	}
	if (hlen == 0 || hlen >= sizeof(ep.host))
		return error_set(err, EINVAL, "'%s' has no usable host", s);
	memcpy(ep.host, host, hlen);
	ep.host[hlen] = '\0';
	if (parse_port(port, ep.port) < 0)
		return error_set(err, EINVAL, "'%s': the port is not a number from 1 to 65535", s);
	if (strcmp(ep.host, "localhost") != 0 && !host_is_numeric(ep.host))
		return error_set(err, EINVAL,
				 "'%s': the host must be a numeric address or localhost "
				 "(names are not resolved)",
				 s);
	ep.transport = HTTP_TCP;
	snprintf(ep.authority, sizeof(ep.authority), strchr(ep.host, ':') ? "[%s]:%s" : "%s:%s",
		 ep.host, ep.port);
	*ret = ep;
	return 0;
}

int http_endpoint_parse_url(const char *url, struct http_endpoint *ret, struct error *err)
{
	struct http_endpoint ep;
	if (!url || !*url)
		return error_set(err, EINVAL, "an empty URL");
	if (strlen(url) >= sizeof(ep.name))
		return error_set(err, ENAMETOOLONG, "the URL is longer than %zu bytes",
				 sizeof(ep.name) - 1);
	if (has_ctl(url, strlen(url)))
		return error_set(err, EINVAL, "the URL holds control characters");
	if (strncmp(url, "unix:", 5) == 0) {
		if (url[5] != '/')
			return error_set(err, EINVAL,
					 "'%s': unix: takes an absolute path, as "
					 "unix:/run/agentbox/agentbox.sock",
					 url);
		return http_endpoint_unix(url + 5, ret, err);
	}
	bool tls;
	const char *rest, *port;
	if (strncasecmp(url, "https://", 8) == 0) {
		tls = true;
		rest = url + 8;
		port = "443";
	} else if (strncasecmp(url, "http://", 7) == 0) {
		tls = false;
		rest = url + 7;
		port = "80";
	} else {
		return error_set(err, EINVAL,
				 "'%s' is not one of https://HOST[:PORT], http://HOST[:PORT], "
				 "unix:/PATH",
				 url);
	}
	size_t alen = strcspn(rest, "/?#");
	if (rest[alen] && strcmp(rest + alen, "/") != 0)
		return error_set(err, EINVAL,
				 "'%s': a path, query or fragment is not taken (the API is at "
				 "the server's root)",
				 url);
	if (memchr(rest, '@', alen))
		return error_set(err, EINVAL,
				 "'%s': no user or password in the URL (the key goes in "
				 "AGENTBOX_KEY)",
				 url);
	if (alen == 0)
		return error_set(err, EINVAL, "'%s' has no host", url);
	/* a port after the host, or after an IPv6 address's ']' */
	const char *close = rest[0] == '[' ? memchr(rest, ']', alen) : NULL;
	const char *from = close ? close : rest;
	bool has_port = memchr(from, ':', alen - (size_t)(from - rest)) != NULL;
	char hostport[sizeof(ep.name)];
	snprintf(hostport, sizeof(hostport), "%.*s%s%s", (int)alen, rest, has_port ? "" : ":",
		 has_port ? "" : port);
	int r = http_endpoint_parse(hostport, &ep, err);
	if (r < 0)
		return r;
	if (ep.transport != HTTP_TCP)
		return error_set(err, EINVAL, "'%s' has no host", url);
	ep.tls = tls;
	snprintf(ep.name, sizeof(ep.name), "%s", url);
	*ret = ep;
	return 0;
}
