/*
 * oci.c - an image's documents, read strictly (oci.h).
 */
#include "image/oci.h"

#include "base/cleanup.h"
#include "base/json-cleanup.h"
#include "base/parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-' || c == '/';
}

static bool is_tag_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

int image_ref_normalize(const char *ref, char *out, size_t size, struct error *err)
{
	size_t len = ref ? strlen(ref) : 0;
	if (len == 0 || len >= IMAGE_REF_MAX)
		return error_set(err, EINVAL, "an image name has 1 to %d bytes", IMAGE_REF_MAX - 1);
	/* the tag: after the last ':' that comes after the last '/' */
	const char *slash = strrchr(ref, '/');
	const char *colon = strrchr(slash ? slash : ref, ':');
	size_t name_len = colon ? (size_t)(colon - ref) : len;
	/* a registry's port: "host:5000/name" has its ':' before the first '/' */
	const char *first_slash = strchr(ref, '/');
	const char *port = memchr(ref, ':', first_slash ? (size_t)(first_slash - ref) : 0);
	for (size_t i = 0; i < name_len; i++) {
		if (port && ref + i == port)
			continue;
		if (port && ref + i > port && ref + i < first_slash) {
			if (ref[i] < '0' || ref[i] > '9')
				return error_set(err, EINVAL, "'%s': a port is digits", ref);
			continue;
		}
		if (!is_name_char(ref[i]))
			return error_set(err, EINVAL,
					 "'%s': a name is lowercase letters, digits, '.', '_', "
					 "'-' and '/'",
					 ref);
		if (ref[i] == '/' && (i == 0 || i + 1 == name_len || ref[i + 1] == '/'))
			return error_set(err, EINVAL, "'%s': an empty part of the name", ref);
	}
	if (name_len == 0 || (port && port + 1 == first_slash))
		return error_set(err, EINVAL, "'%s': no name", ref);
	const char *tag = colon ? colon + 1 : "latest";
	size_t tag_len = strlen(tag);
	if (tag_len == 0 || tag_len > IMAGE_TAG_MAX)
		return error_set(err, EINVAL, "'%s': a tag has 1 to %d characters", ref,
				 IMAGE_TAG_MAX);
	for (size_t i = 0; i < tag_len; i++)
		if (!is_tag_char(tag[i]))
			return error_set(err, EINVAL,
					 "'%s': a tag is letters, digits, '.', '_', '-'", ref);
	int n = snprintf(out, size, "%.*s:%s", (int)name_len, ref, tag);
	if (n < 0 || (size_t)n >= size || (size_t)n >= IMAGE_REF_MAX)
		return error_set(err, EINVAL, "'%s': an image name has at most %d bytes", ref,
				 IMAGE_REF_MAX - 1);
	return 0;
}

bool image_media_type_is_index(const char *mt)
{
	return strcmp(mt, IMAGE_MT_OCI_INDEX) == 0 || strcmp(mt, IMAGE_MT_DOCKER_LIST) == 0;
}

bool image_media_type_is_manifest(const char *mt)
{
	return strcmp(mt, IMAGE_MT_OCI_MANIFEST) == 0 || strcmp(mt, IMAGE_MT_DOCKER_MANIFEST) == 0;
}

/* Parse a document of at most max bytes: an object or an array into *ret. */
static int load(const char *json, size_t len, size_t max, const char *what, json_t **ret,
		struct error *err)
{
	if (len > max)
		return error_set(err, E2BIG, "%s: larger than %zu bytes", what, max);
	json_error_t je;
	json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!v)
		return error_set(err, EINVAL, "%s: not JSON (%s)", what, je.text);
	if (!json_is_object(v) && !json_is_array(v)) {
		json_decref(v);
		return error_set(err, EINVAL, "%s: not a JSON object", what);
	}
	*ret = v;
	return 0;
}

/* A descriptor: mediaType (default def), digest, size. */
static int descriptor_parse(json_t *o, const char *def, const char *what,
			    struct image_descriptor *ret, struct error *err)
{
	if (!json_is_object(o))
		return error_set(err, EINVAL, "%s: not a descriptor", what);
	json_t *mt = json_object_get(o, "mediaType");
	json_t *dg = json_object_get(o, "digest");
	json_t *sz = json_object_get(o, "size");
	const char *mts = json_is_string(mt) ? json_string_value(mt) : def;
	if (!mts || strlen(mts) >= IMAGE_MEDIA_TYPE_MAX)
		return error_set(err, EINVAL, "%s: no mediaType", what);
	if (!json_is_string(dg) || !image_digest_is_valid(json_string_value(dg)))
		return error_set(err, EINVAL, "%s: the digest is not sha256:<64 hex digits>", what);
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return error_set(err, EINVAL, "%s: no size", what);
	snprintf(ret->media_type, sizeof(ret->media_type), "%s", mts);
	snprintf(ret->digest, sizeof(ret->digest), "%s", json_string_value(dg));
	ret->size = (uint64_t)json_integer_value(sz);
	return 0;
}

static const char *platform_of(json_t *entry, const char *key)
{
	json_t *p = json_object_get(entry, "platform");
	json_t *v = json_is_object(p) ? json_object_get(p, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *annotation(json_t *entry, const char *key)
{
	json_t *a = json_object_get(entry, "annotations");
	json_t *v = json_is_object(a) ? json_object_get(a, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int image_index_choose(const char *json, size_t len, struct image_descriptor *ret, char *ret_name,
		       size_t name_size, struct error *err)
{
	_cleanup_json_ json_t *v = NULL;
	int lr = load(json, len, IMAGE_INDEX_MAX, "index", &v, err);
	if (lr < 0)
		return lr;
	json_t *ms = json_object_get(v, "manifests");
	if (!json_is_array(ms) || json_array_size(ms) == 0)
		return error_set(err, EINVAL, "index: no manifests");
	if (json_array_size(ms) > IMAGE_INDEX_ENTRIES_MAX)
		return error_set(err, E2BIG, "index: more than %d manifests",
				 IMAGE_INDEX_ENTRIES_MAX);
	json_t *chosen = NULL, *first_plain = NULL;
	bool any_platform = false;
	char others[256] = "";
	size_t i;
	json_t *e;
	json_array_foreach(ms, i, e)
	{
		const char *os = platform_of(e, "os"), *arch = platform_of(e, "architecture");
		if (!os && !arch) {
			if (!first_plain)
				first_plain = e;
			continue;
		}
		any_platform = true;
		if (os && arch && strcmp(os, IMAGE_OS) == 0 && strcmp(arch, IMAGE_ARCH) == 0) {
			chosen = e;
			break;
		}
		size_t n = strlen(others);
		snprintf(others + n, sizeof(others) - n, "%s%s/%s", n ? ", " : "", os ? os : "?",
			 arch ? arch : "?");
	}
	/* entries without a platform are taken only from an index that names none */
	if (!chosen && !any_platform)
		chosen = first_plain;
	if (!chosen)
		return error_set(err, ENOEXEC, "index: no %s/%s image (it has %s)", IMAGE_OS,
				 IMAGE_ARCH, others);
	int r = descriptor_parse(chosen, NULL, "index: the chosen manifest", ret, err);
	if (r < 0)
		return r;
	if (!image_media_type_is_index(ret->media_type) &&
	    !image_media_type_is_manifest(ret->media_type))
		return error_set(err, EINVAL, "index: the chosen entry is a %s, not a manifest",
				 ret->media_type);
	if (ret_name && name_size) {
		const char *name = annotation(chosen, IMAGE_ANN_CONTAINERD_NAME);
		if (!name)
			name = annotation(chosen, IMAGE_ANN_REF_NAME);
		snprintf(ret_name, name_size, "%s", name && strlen(name) < name_size ? name : "");
	}
	return 0;
}

int image_manifest_parse(const char *json, size_t len, struct image_manifest *ret,
			 struct error *err)
{
	memset(ret, 0, sizeof(*ret));
	_cleanup_json_ json_t *v = NULL;
	int lr = load(json, len, IMAGE_MANIFEST_MAX, "manifest", &v, err);
	if (lr < 0)
		return lr;
	json_t *sv = json_object_get(v, "schemaVersion");
	if (!json_is_integer(sv) || json_integer_value(sv) != 2)
		return error_set(err, EINVAL, "manifest: schemaVersion is not 2");
	json_t *mt = json_object_get(v, "mediaType");
	if (mt && (!json_is_string(mt) || !image_media_type_is_manifest(json_string_value(mt))))
		return error_set(err, EINVAL, "manifest: not an image manifest");
	int r = descriptor_parse(json_object_get(v, "config"), IMAGE_MT_OCI_CONFIG,
				 "manifest: config", &ret->config, err);
	if (r < 0)
		return r;
	json_t *ls = json_object_get(v, "layers");
	if (!json_is_array(ls))
		return error_set(err, EINVAL, "manifest: no layers");
	size_t n = json_array_size(ls);
	if (n > IMAGE_LAYERS_MAX)
		return error_set(err, E2BIG, "manifest: more than %d layers", IMAGE_LAYERS_MAX);
	ret->layers = calloc(n ? n : 1, sizeof(*ret->layers));
	if (!ret->layers)
		return error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		char what[48];
		snprintf(what, sizeof(what), "manifest: layers[%zu]", i);
		if ((r = descriptor_parse(json_array_get(ls, i), NULL, what, &ret->layers[i],
					  err)) < 0) {
			image_manifest_release(ret);
			return r;
		}
	}
	ret->nlayers = n;
	return 0;
}

void image_manifest_release(struct image_manifest *m)
{
	free(m->layers);
	memset(m, 0, sizeof(*m));
}

static json_t *descriptor_json(const struct image_descriptor *d)
{
	return json_pack("{s:s, s:s, s:I}", "mediaType", d->media_type, "digest", d->digest, "size",
			 (json_int_t)d->size);
}

int image_manifest_json(const struct image_manifest *m, char **ret, size_t *ret_len)
{
	json_t *layers = json_array();
	for (size_t i = 0; layers && i < m->nlayers; i++)
		if (json_array_append_new(layers, descriptor_json(&m->layers[i])) < 0) {
			json_decref(layers);
			layers = NULL;
		}
	_cleanup_json_ json_t *v = json_pack("{s:i, s:s, s:o, s:o*}", "schemaVersion", 2,
					     "mediaType", IMAGE_MT_OCI_MANIFEST, "config",
					     descriptor_json(&m->config), "layers", layers);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	if (!text)
		return -ENOMEM;
	*ret = text;
	*ret_len = strlen(text);
	return 0;
}

/* A string member of a config: absent or null is NULL; else at most IMAGE_STRING_MAX. */
static int config_string(json_t *o, const char *key, char **ret, struct error *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return error_set(err, EINVAL, "config: %s is not a string", key);
	if (json_string_length(v) > IMAGE_STRING_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return error_set(err, E2BIG, "config: %s is longer than %d bytes or holds NUL", key,
				 IMAGE_STRING_MAX);
	if (json_string_length(v) == 0)
		return 0;
	if (!(*ret = strdup(json_string_value(v))))
		return error_set(err, ENOMEM, "out of memory");
	return 0;
}

/* An array of strings: absent or null is none; NULL-terminated into *ret. */
static int config_strings(json_t *o, const char *key, size_t max, char ***ret, size_t *ret_n,
			  struct error *err)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return error_set(err, EINVAL, "config: %s is not an array", key);
	size_t n = json_array_size(v);
	if (n > max)
		return error_set(err, E2BIG, "config: %s has more than %zu entries", key, max);
	char **a = calloc(n + 1, sizeof(*a));
	if (!a)
		return error_set(err, ENOMEM, "out of memory");
	*ret = a; /* released by the caller, whole or part */
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(v, i);
		if (!json_is_string(s) || json_string_length(s) > IMAGE_STRING_MAX ||
		    strlen(json_string_value(s)) != json_string_length(s))
			return error_set(err, EINVAL,
					 "config: %s[%zu] is not a string of at most %d bytes "
					 "without NUL",
					 key, i, IMAGE_STRING_MAX);
		if (!(a[i] = strdup(json_string_value(s))))
			return error_set(err, ENOMEM, "out of memory");
		*ret_n = i + 1;
	}
	return 0;
}

static int config_fill(json_t *v, struct image_config *c, struct error *err)
{
	json_t *os = json_object_get(v, "os"), *arch = json_object_get(v, "architecture");
	snprintf(c->os, sizeof(c->os), "%s", json_is_string(os) ? json_string_value(os) : "");
	snprintf(c->arch, sizeof(c->arch), "%s",
		 json_is_string(arch) ? json_string_value(arch) : "");
	json_t *created = json_object_get(v, "created");
	if (json_is_string(created) &&
	    parse_rfc3339_ms(json_string_value(created), &c->created_ms) < 0)
		c->created_ms = 0; /* a date we cannot read is no date */
	json_t *rootfs = json_object_get(v, "rootfs");
	int r = 0;
	if (json_is_object(rootfs) && (r = config_strings(rootfs, "diff_ids", IMAGE_LAYERS_MAX,
							  &c->diff_ids, &c->ndiff_ids, err)) < 0)
		return r;
	json_t *cfg = json_object_get(v, "config");
	if (!cfg || json_is_null(cfg))
		return 0;
	if (!json_is_object(cfg))
		return error_set(err, EINVAL, "config: config is not an object");
	if ((r = config_strings(cfg, "Env", IMAGE_ENV_MAX, &c->env, &c->nenv, err)) < 0 ||
	    (r = config_strings(cfg, "Entrypoint", IMAGE_ARGS_MAX, &c->entrypoint, &c->nentrypoint,
				err)) < 0 ||
	    (r = config_strings(cfg, "Cmd", IMAGE_ARGS_MAX, &c->cmd, &c->ncmd, err)) < 0 ||
	    (r = config_string(cfg, "WorkingDir", &c->working_dir, err)) < 0 ||
	    (r = config_string(cfg, "User", &c->user, err)) < 0)
		return r;
	for (size_t i = 0; i < c->nenv; i++) {
		const char *eq = strchr(c->env[i], '=');
		if (!eq || eq == c->env[i])
			return error_set(err, EINVAL, "config: Env[%zu] is not KEY=VALUE", i);
	}
	if (c->working_dir && c->working_dir[0] != '/')
		return error_set(err, EINVAL, "config: WorkingDir is not an absolute path");
	return 0;
}

int image_config_parse(const char *json, size_t len, struct image_config *ret, struct error *err)
{
	memset(ret, 0, sizeof(*ret));
	_cleanup_json_ json_t *v = NULL;
	int lr = load(json, len, IMAGE_CONFIG_MAX, "config", &v, err);
	if (lr < 0)
		return lr;
	if (!json_is_object(v))
		return error_set(err, EINVAL, "config: not a JSON object");
	int r = config_fill(v, ret, err);
	if (r < 0)
		image_config_release(ret);
	return r;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

void image_config_release(struct image_config *c)
{
	strv_free(c->env, c->nenv);
	strv_free(c->entrypoint, c->nentrypoint);
	strv_free(c->cmd, c->ncmd);
	strv_free(c->diff_ids, c->ndiff_ids);
	free(c->working_dir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

int image_docker_save_parse(const char *json, size_t len, struct image_docker_save *ret,
			    struct error *err)
{
	memset(ret, 0, sizeof(*ret));
	_cleanup_json_ json_t *v = NULL;
	int lr = load(json, len, IMAGE_MANIFEST_MAX, "manifest.json", &v, err);
	if (lr < 0)
		return lr;
	json_t *e = json_is_array(v) ? json_array_get(v, 0) : NULL;
	if (!json_is_object(e))
		return error_set(err, EINVAL, "manifest.json: not a list of images");
	json_t *cfg = json_object_get(e, "Config");
	json_t *layers = json_object_get(e, "Layers");
	json_t *tags = json_object_get(e, "RepoTags");
	if (!json_is_string(cfg) || json_string_length(cfg) >= IMAGE_STRING_MAX)
		return error_set(err, EINVAL, "manifest.json: no Config");
	if (!json_is_array(layers))
		return error_set(err, EINVAL, "manifest.json: no Layers");
	if (json_array_size(layers) > IMAGE_LAYERS_MAX)
		return error_set(err, E2BIG, "manifest.json: more than %d layers",
				 IMAGE_LAYERS_MAX);
	json_t *tag = json_is_array(tags) ? json_array_get(tags, 0) : NULL;
	if (json_is_string(tag) && json_string_length(tag) < sizeof(ret->name))
		snprintf(ret->name, sizeof(ret->name), "%s", json_string_value(tag));
	if (!(ret->config = strdup(json_string_value(cfg))))
		return error_set(err, ENOMEM, "out of memory");
	int r = config_strings(e, "Layers", IMAGE_LAYERS_MAX, &ret->layers, &ret->nlayers, err);
	if (r < 0)
		image_docker_save_release(ret);
	return r;
}

void image_docker_save_release(struct image_docker_save *d)
{
	free(d->config);
	strv_free(d->layers, d->nlayers);
	memset(d, 0, sizeof(*d));
}
