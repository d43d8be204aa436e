/*
 * terminal-get.h - a terminal a browser can open: the WebSocket handshake
 * GET /v1/sandboxes/{id}/exec with the exec request in its query, the
 * API key in Sec-WebSocket-Protocol (a browser's WebSocket cannot set
 * Authorization), and the rule on Origin that keeps other sites' pages
 * out (docs/api.md "A terminal", docs/SECURITY.md). Pure: no store, no
 * fleet, no socket; the handler is sandbox-exec.c's.
 *
 * Subprotocols (one Sec-WebSocket-Protocol header, comma-separated):
 *   API_WS_PROTOCOL              the terminal's frames; the 101 names it
 *   API_WS_KEY_PREFIX<base64url> the key, its bytes in base64url (RFC 4648
 *                                section 5, without padding); never echoed
 * A key is read there only on a terminal's handshake (Upgrade: websocket
 * to .../exec, either method), never from the query.
 */
#ifndef AGENTBOX_API_TERMINAL_GET_H
#define AGENTBOX_API_TERMINAL_GET_H

#include "api/api.h"
#include "api/sandbox-request.h"

#include <stdbool.h>

#define API_WS_PROTOCOL	  "agentbox.terminal.v1"
#define API_WS_KEY_PREFIX "agentbox.key."
/* Characters of a key's base64url in its subprotocol; more is 401. */
#define API_WS_KEY_B64_MAX 256
/* Bytes of the "Bearer <key>" api_ws_bearer() makes, its NUL included. */
#define API_WS_BEARER_SIZE (7 + API_WS_KEY_B64_MAX * 3 / 4 + 1)
/* Bytes of an origin agentboxd --allow-origin takes; more is refused. */
#define API_ORIGIN_MAX 256
/* agentboxd --allow-origin options. */
#define API_ORIGINS_MAX 16

/* Does the comma-separated header value list hold token (case-insensitive)? */
bool api_header_has_token(const char *list, const char *token);

/* Is req a terminal's handshake: Upgrade: websocket, to .../exec (GET or POST)? */
bool api_is_terminal_handshake(const struct api_request *req);

/*
 * The key a terminal's handshake carries in Sec-WebSocket-Protocol, as
 * an Authorization header's value "Bearer <key>" in buf (wipe it after
 * use: it holds the secret). 1: found; 0: none (not a terminal's
 * handshake, or no API_WS_KEY_PREFIX subprotocol); -EINVAL: one that is
 * not base64url of a printable key, too long, or more than one.
 */
int api_ws_bearer(const struct api_request *req, char buf[API_WS_BEARER_SIZE]);

/* Does req carry a key, in Authorization or (a terminal's handshake) its subprotocols? */
bool api_request_has_key(const struct api_request *req);

/*
 * The subprotocols of a terminal's handshake: none, or a list that holds
 * API_WS_PROTOCOL (*ret_echo: the 101 names it); else 400 bad_handshake
 * naming Sec-WebSocket-Protocol. Others in the list are ignored.
 */
int api_ws_protocol_check(const struct api_request *req, bool *ret_echo, struct api_error *e);

/* Is s an origin agentboxd --allow-origin takes: http[s]://host[:port], no path? */
bool api_origin_is_valid(const char *s);

/*
 * A terminal's handshake that carries Origin (a browser's page) is 403
 * forbidden naming Origin unless the origin is one of ctx's (compared
 * case-insensitively). One without Origin (not a browser) passes.
 */
int api_origin_check(const struct api_ctx *ctx, const struct api_request *req, struct api_error *e);

/*
 * The exec request of GET .../exec from its query (still percent-encoded;
 * at most API_QUERY_MAX bytes): "command" once per word, in order; "env"
 * once per NAME=VALUE; "cwd", "timeout_s", "rows", "cols" at most once;
 * "tty" absent, 1 or true. It is made into the exec body's JSON and
 * parsed by exec_request_parse()'s very rules, "tty": true, so every
 * check and every error is the POST form's, naming the same field. A
 * parameter that names a key (key, token, access_token, ...) is
 * invalid_field naming it (a key never goes in a URL); any other is
 * unknown_field. *ret as exec_request_parse()'s; release it.
 */
int exec_request_from_query(const char *query, struct exec_request *ret, struct api_error *e);

#endif
