/*
 * pull-http.c - a pull's requests to one registry (pull-internal.h),
 * with libcurl: TLS always verified (the system's CAs, and the
 * registry's configured cacert added to them), the schemes allowed
 * (https; http for an insecure_http registry), redirects capped, bodies
 * capped as they arrive, and the registry's 401 answered once per
 * request (Basic credentials, or a Bearer token from its realm).
 */
#include "image/pull-internal.h"

#include "base/cleanup.h"
#include "base/fileio.h"
#include "base/json-cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PULL_USER_AGENT	    "agentbox-image-pull"
#define PULL_CHALLENGES_MAX 4 /* WWW-Authenticate headers of one answer kept */
#define PULL_MEM_BLOCK	    (64u << 10)

/* One request's state, for libcurl's callbacks. */
struct req {
	CURL *curl;
	struct pull_sink *sink;
	struct pull_answer *ans;
	char challenge[PULL_CHALLENGES_MAX][PULL_HEADER_MAX];
	size_t nchallenges;
	char errbody[PULL_ERROR_BODY_MAX + 1]; /* a non-2xx answer's body, its start */
	size_t errlen;
	bool errbody_over;
};

int pull_http_init(struct pull_http *h, const char *host, const struct image_registry *reg,
		   const char *repo, struct error *err)
{
	memset(h, 0, sizeof(*h));
	h->reg = reg;
	snprintf(h->host, sizeof(h->host), "%s", host);
	snprintf(h->base, sizeof(h->base), "%s://%s", reg && reg->insecure_http ? "http" : "https",
		 host);
	snprintf(h->scope, sizeof(h->scope), "repository:%s:pull", repo);
	if (!(h->curl = curl_easy_init()))
		return error_set(err, ENOMEM, "libcurl: out of memory");
	return 0;
}

void pull_http_release(struct pull_http *h)
{
	if (h->curl)
		curl_easy_cleanup(h->curl);
	if (h->token) {
		explicit_bzero(h->token, strlen(h->token));
		free(h->token);
	}
	memset(h, 0, sizeof(*h));
}

/* The registry's CAs beside the system's, in each TLS context libcurl makes. */
static CURLcode add_cas(CURL *curl, void *ssl_ctx, void *data)
{
	(void)curl;
	const struct image_registry *reg = data;
	X509_STORE *st = SSL_CTX_get_cert_store(ssl_ctx);
	for (int i = 0; st && i < sk_X509_num(reg->cas); i++)
		if (X509_STORE_add_cert(st, sk_X509_value(reg->cas, i)) != 1)
			return CURLE_SSL_CACERT_BADFILE;
	return CURLE_OK;
}

/* "Name: value\r\n" of name (lowercase) into out, trimmed; false when another header. */
static bool header_value(const char *b, size_t len, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);
	if (len <= n || strncasecmp(b, name, n) != 0 || b[n] != ':')
		return false;
	const char *v = b + n + 1, *end = b + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t vlen = (size_t)(end - v);
	if (vlen >= size)
		vlen = size - 1; /* cut: a value that long is refused where it is read */
	memcpy(out, v, vlen);
	out[vlen] = '\0';
	return true;
}

static size_t on_header(char *b, size_t size, size_t n, void *data)
{
	struct req *q = data;
	size_t len = size * n;
	if (len >= 5 && strncmp(b, "HTTP/", 5) == 0) { /* a new answer (after a redirect) */
		q->ans->content_type[0] = q->ans->digest[0] = '\0';
		q->nchallenges = 0;
		return len;
	}
	char scratch[PULL_HEADER_MAX];
	if (header_value(b, len, "content-type", scratch, sizeof(scratch))) {
		scratch[strcspn(scratch, "; ")] = '\0'; /* parameters go */
		snprintf(q->ans->content_type, sizeof(q->ans->content_type), "%s", scratch);
	} else if (header_value(b, len, "docker-content-digest", scratch, sizeof(scratch))) {
		snprintf(q->ans->digest, sizeof(q->ans->digest), "%s", scratch);
	} else if (q->nchallenges < PULL_CHALLENGES_MAX &&
		   header_value(b, len, "www-authenticate", q->challenge[q->nchallenges],
				sizeof(q->challenge[0]))) {
		q->nchallenges++;
	}
	return len;
}

static size_t on_body(char *b, size_t size, size_t n, void *data)
{
	struct req *q = data;
	struct pull_sink *s = q->sink;
	size_t len = size * n;
	long code = 0;
	curl_easy_getinfo(q->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) { /* an error's body: its start, for its message */
		size_t take =
		    len < PULL_ERROR_BODY_MAX - q->errlen ? len : PULL_ERROR_BODY_MAX - q->errlen;
		memcpy(q->errbody + q->errlen, b, take);
		q->errlen += take;
		q->errbody[q->errlen] = '\0';
		if (take < len)
			q->errbody_over = true;
		return take < len ? 0 : len;
	}
	if (s->got + len > s->max) {
		s->over = true;
		return 0; /* libcurl stops: CURLE_WRITE_ERROR */
	}
	if (s->fd < 0) {
		if (s->len + len + 1 > s->cap) {
			size_t want = s->len + len + 1 + PULL_MEM_BLOCK;
			char *nb = realloc(s->buf, want);
			if (!nb) {
				s->write_error = ENOMEM;
				return 0;
			}
			s->buf = nb;
			s->cap = want;
		}
		memcpy(s->buf + s->len, b, len);
		s->len += len;
		s->buf[s->len] = '\0';
	} else {
		int r = write_all(s->fd, b, len);
		if (r < 0) {
			s->write_error = -r;
			return 0;
		}
		if (s->hash)
			sha256_update(&s->h, b, len);
	}
	s->got += len;
	return len;
}

/* A libcurl failure as pull.h's errno. */
static int curl_failure(struct pull_http *h, struct req *q, CURLcode c, const char *errbuf,
			struct error *err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(c);
	if (c == CURLE_WRITE_ERROR && q->sink->over)
		return error_set(err, EBADMSG,
				 "registry %s sent more than the %llu bytes its descriptor says",
				 h->host, (unsigned long long)q->sink->max);
	if (c == CURLE_WRITE_ERROR && q->sink->write_error)
		return error_set_errno(err, q->sink->write_error, "writing what registry %s sent",
				       h->host);
	if (c == CURLE_WRITE_ERROR && q->errbody_over)
		return 1; /* an error answer, cut short: its status says it */
	int e = EPROTO;
	switch (c) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		e = EHOSTUNREACH;
		break;
	case CURLE_COULDNT_CONNECT:
		e = ECONNREFUSED;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		e = ETIMEDOUT;
		break;
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		e = ECONNRESET;
		break;
	case CURLE_FILESIZE_EXCEEDED:
		if (q->ans->status < 200 || q->ans->status > 299)
			return 1; /* an error answer's body, longer than the blob: its status says
				   */
		return error_set(err, EBADMSG,
				 "registry %s announced more than the %llu bytes its descriptor "
				 "says",
				 h->host, (unsigned long long)q->sink->max);
	default:
		break;
	}
	return error_set(err, e, "registry %s: %s", h->host, why);
}

/*
 * One request of url, its body into sink; auth: send the registry's
 * credentials (Basic) or token as h has them. 0 with ans->status set (any
 * status), or -errno for no answer.
 */
static int perform(struct pull_http *h, const char *url, const char *accept, bool blob, bool auth,
		   struct req *q, struct error *err)
{
	CURL *c = h->curl;
	const struct image_registry *reg = h->reg;
	const char *schemes = reg && reg->insecure_http ? "http,https" : "https";
	char errbuf[CURL_ERROR_SIZE] = "", line[PULL_TOKEN_MAX + 32];
	struct curl_slist *headers = NULL, *more;
	curl_easy_reset(c);
	q->curl = c;
	q->nchallenges = q->errlen = 0;
	q->errbody_over = false;
	q->ans->status = 0;
	q->ans->content_type[0] = q->ans->digest[0] = '\0';
	if (accept) {
		snprintf(line, sizeof(line), "Accept: %s", accept);
		if (!(more = curl_slist_append(headers, line)))
			goto nomem;
		headers = more;
	}
	if (auth && h->token) {
		snprintf(line, sizeof(line), "Authorization: Bearer %s", h->token);
		more = curl_slist_append(headers, line);
		explicit_bzero(line, sizeof(line));
		if (!more)
			goto nomem;
		headers = more;
	} else if (auth && h->basic && reg && reg->username) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, reg->username);
		curl_easy_setopt(c, CURLOPT_PASSWORD, reg->password);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, schemes);
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, schemes);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)PULL_REDIRECTS_MAX);
	curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)PULL_CONNECT_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_TIMEOUT,
			 (long)(blob ? PULL_BLOB_TIMEOUT_S : PULL_DOC_TIMEOUT_S));
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)PULL_STALL_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)q->sink->max);
	curl_easy_setopt(c, CURLOPT_USERAGENT, PULL_USER_AGENT);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, q);
	if (reg && reg->cas) {
		/* no shared CA cache: the store the callback adds to is this transfer's */
		curl_easy_setopt(c, CURLOPT_CA_CACHE_TIMEOUT, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, add_cas);
		if (curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, (void *)reg) != CURLE_OK) {
			curl_slist_free_all(headers);
			return error_set(err, EPROTO,
					 "registry %s: this libcurl cannot add a cacert (it is not "
					 "built with OpenSSL)",
					 h->host);
		}
	}
	CURLcode cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &q->ans->status);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(headers);
	if (cc != CURLE_OK) {
		int r = curl_failure(h, q, cc, errbuf, err);
		if (r < 0)
			return r;
	}
	return 0;
nomem:
	curl_slist_free_all(headers);
	return error_set(err, ENOMEM, "out of memory");
}

/* The registry's own words of an error answer ({"errors": [{"code", "message"}]}), or "". */
static void registry_words(const struct req *q, char *out, size_t size)
{
	json_error_t jerr;
	_cleanup_json_ json_t *v = json_loadb(q->errbody, q->errlen, 0, &jerr);
	json_t *e = json_array_get(json_object_get(v, "errors"), 0);
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	out[0] = '\0';
	if (code || msg)
		snprintf(out, size, " (%.40s%s%.120s)", code ? code : "", code && msg ? ": " : "",
			 msg ? msg : "");
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* A Bearer token from the challenge's realm, into h->token. */
static int fetch_token(struct pull_http *h, const struct image_auth_challenge *ch,
		       struct error *err)
{
	const struct image_registry *reg = h->reg;
	CURLU *u = curl_url();
	char *scheme = NULL, *url = NULL, q_service[PULL_SERVICE_MAX + 16],
	     q_scope[PULL_SCOPE_MAX + 16];
	int r = 0;
	if (!u)
		return error_set(err, ENOMEM, "out of memory");
	snprintf(q_service, sizeof(q_service), "service=%s", ch->service);
	snprintf(q_scope, sizeof(q_scope), "scope=%s", ch->scope[0] ? ch->scope : h->scope);
	if (curl_url_set(u, CURLUPART_URL, ch->realm, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
		r = error_set(err, EPROTO, "registry %s: its token realm is not a URL", h->host);
	else if (strcmp(scheme, "https") != 0 &&
		 !(strcmp(scheme, "http") == 0 && reg && reg->insecure_http))
		r = error_set(err, EPROTO,
			      "registry %s: its token realm is not https (only an insecure_http "
			      "registry's may be http)",
			      h->host);
	else if ((ch->service[0] &&
		  curl_url_set(u, CURLUPART_QUERY, q_service,
			       CURLU_APPENDQUERY | CURLU_URLENCODE) != CURLUE_OK) ||
		 curl_url_set(u, CURLUPART_QUERY, q_scope, CURLU_APPENDQUERY | CURLU_URLENCODE) !=
		     CURLUE_OK ||
		 curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
		r = error_set(err, EPROTO, "registry %s: its token realm is not a URL", h->host);
	curl_free(scheme);
	curl_url_cleanup(u);
	if (r < 0)
		return r;
	struct pull_sink sink = {.fd = -1, .max = PULL_TOKEN_MAX};
	struct pull_answer ans = {0};
	struct req q = {.sink = &sink, .ans = &ans};
	bool creds = reg && reg->username;
	bool saved_basic = h->basic;
	h->basic = creds; /* the token service gets the credentials, if any */
	char *saved_token = TAKE_PTR(h->token);
	r = perform(h, url, "application/json", false, true, &q, err);
	h->basic = saved_basic;
	h->token = saved_token;
	curl_free(url);
	if (r == 0 && (ans.status == 401 || ans.status == 403))
		r = error_set(err, EACCES,
			      creds ? "registry %s: its token service refused the credentials "
				      "configured for it"
				    : "registry %s: its token service refused anonymous access (no "
				      "credentials are configured for it in --registry-config)",
			      h->host);
	else if (r == 0 && (ans.status < 200 || ans.status > 299))
		r = error_set(err, EPROTO, "registry %s: its token service answered HTTP %ld",
			      h->host, ans.status);
	json_error_t jerr;
	_cleanup_json_ json_t *v = r == 0 ? json_loadb(sink.buf, sink.len, 0, &jerr) : NULL;
	if (sink.buf)
		explicit_bzero(sink.buf, sink.len);
	free(sink.buf);
	if (r < 0)
		return r;
	json_t *t = json_object_get(v, "token");
	if (!json_is_string(t) || json_string_length(t) == 0)
		t = json_object_get(v, "access_token");
	const char *tok = json_string_value(t);
	bool ok = tok && json_string_length(t) > 0 && json_string_length(t) <= PULL_TOKEN_MAX;
	for (size_t i = 0; ok && tok[i]; i++)
		ok = tok[i] > 0x20 && tok[i] < 0x7f; /* it goes into a header */
	if (!ok)
		return error_set(err, EPROTO,
				 "registry %s: its token service's answer has no usable token",
				 h->host);
	free(h->token);
	if (!(h->token = strdup(tok)))
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

/* A 401's challenge (Bearer before Basic), acted on: h gets a token or Basic. */
static int authenticate(struct pull_http *h, const struct req *q, struct error *err)
{
	struct image_auth_challenge ch = {0}, one;
	struct error cerr = {0};
	for (size_t i = 0; i < q->nchallenges; i++)
		if (image_auth_challenge_parse(q->challenge[i], &one, &cerr) == 0 &&
		    (!ch.scheme || one.scheme == IMAGE_AUTH_BEARER))
			ch = one;
	if (!ch.scheme)
		return error_set(err, EPROTO, "registry %s answered 401 %s", h->host,
				 q->nchallenges ? cerr.msg : "without a challenge");
	if (ch.scheme == IMAGE_AUTH_BEARER)
		return fetch_token(h, &ch, err);
	if (!h->reg || !h->reg->username)
		return error_set(err, EACCES,
				 "registry %s asks for credentials, and --registry-config has "
				 "none for it",
				 h->host);
	h->basic = true;
	return 0;
}

int pull_http_get(struct pull_http *h, const char *path, const char *accept, bool blob,
		  struct pull_sink *sink, struct pull_answer *ans, struct error *err)
{
	char url[sizeof(h->base) + IMAGE_REF_MAX + 128];
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	struct req *q = calloc(1, sizeof(*q));
	if (!q)
		return error_set(err, ENOMEM, "out of memory");
	q->sink = sink;
	q->ans = ans;
	bool reauthed = false;
	int r;
	for (;;) {
		r = perform(h, url, accept, blob, true, q, err);
		if (r < 0 || ans->status != 401 || reauthed)
			break;
		reauthed = true; /* once: a second 401 is a refusal */
		if ((r = authenticate(h, q, err)) < 0)
			break;
	}
	char words[200];
	registry_words(q, words, sizeof(words));
	if (r < 0)
		; /* err says */
	else if (ans->status >= 200 && ans->status <= 299)
		r = 0;
	else if (ans->status == 401)
		r = error_set(err, EACCES, "registry %s refused the credentials%s%s", h->host,
			      h->reg && h->reg->username ? " configured for it" : "", words);
	else if (ans->status == 403)
		r = error_set(err, EACCES, "registry %s denied access to %s%s", h->host, path,
			      words);
	else if (ans->status == 404)
		r = error_set(err, ENOENT, "registry %s has no %s%s", h->host, path, words);
	else
		r = error_set(err, EPROTO, "registry %s answered HTTP %ld to %s%s", h->host,
			      ans->status, path, words);
	free(q);
	return r;
}
