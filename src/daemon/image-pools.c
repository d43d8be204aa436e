/*
 * image-pools.c - agentboxd --pool IMAGE=N: the warm pools of images'
 * sandboxes (fleet/fleet.h's struct fleet_image_pool), their option and
 * their specs, resolved in the image store when the daemon starts.
 */
#include "daemon/daemon.h"

#include "api/image-choice.h"
#include "api/sandbox-request.h"
#include "base/cleanup.h"
#include "base/parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --pool IMAGE=N, split in place: 0, or -1 with the message printed. */
int daemon_pool_image_option(struct daemon *d, char *arg)
{
	char *eq = strrchr(arg, '=');
	uint64_t v;
	*eq = '\0';
	if (!*arg || parse_u64(eq + 1, &v) < 0 || v > FLEET_POOL_MAX) {
		fprintf(stderr, "agentboxd: --pool: '%s=%s' is not IMAGE=0..%d\n", arg, eq + 1,
			FLEET_POOL_MAX);
		return -1;
	}
	for (size_t i = 0; i < d->cfg.nimage_pools; i++)
		if (strcmp(d->cfg.image_pools[i].ref, arg) == 0) {
			d->cfg.image_pools[i].size = (unsigned)v; /* the last one counts */
			return 0;
		}
	if (d->cfg.nimage_pools == FLEET_IMAGE_POOLS_MAX) {
		fprintf(stderr, "agentboxd: --pool: more than %d images' pools\n",
			FLEET_IMAGE_POOLS_MAX);
		return -1;
	}
	d->cfg.image_pools[d->cfg.nimage_pools].ref = arg;
	d->cfg.image_pools[d->cfg.nimage_pools++].size = (unsigned)v;
	return 0;
}

/*
 * The specs of the images' pools (--pool IMAGE=N): each as a create of
 * {"image": IMAGE} makes it, resolved in the store now; an image the
 * store lacks stops the start.
 */
int daemon_image_pools(struct daemon *d, struct fleet_image_pool *pools, struct error *err)
{
	for (size_t i = 0; i < d->cfg.nimage_pools; i++) {
		const char *ref = d->cfg.image_pools[i].ref;
		struct sandbox_request sr = {0};
		struct api_error e = {0};
		struct image_choice choice;
		json_t *body = json_pack("{s:s}", "image", ref);
		char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		json_decref(body);
		int r = text ? sandbox_request_parse(text, strlen(text), &sr, &e) : -ENOMEM;
		free(text);
		if (r == 0)
			r = image_choice_apply(d->images, NULL, &sr.spec_json, false, &choice, &e);
		if (r < 0) {
			sandbox_request_release(&sr);
			return r == -ENOMEM
				   ? error_set(err, ENOMEM, "out of memory")
				   : error_set(err, EINVAL, "--pool %s: %s", ref, e.message);
		}
		struct fleet_image_pool *p = &pools[i];
		snprintf(p->config, sizeof(p->config), "%s", choice.config);
		p->spec_json = TAKE_PTR(sr.spec_json);
		p->size = d->cfg.image_pools[i].size;
		sandbox_request_release(&sr);
	}
	return 0;
}
