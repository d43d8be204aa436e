/*
 * bootstrap-internal.h - a bootstrapped tree packed into an OCI image
 * layout (bootstrap-pack.c), for bootstrap.c.
 */
#ifndef AGENTBOX_IMAGE_BOOTSTRAP_INTERNAL_H
#define AGENTBOX_IMAGE_BOOTSTRAP_INTERNAL_H

#include "base/error.h"

/*
 * Pack the tree at rootfs (an absolute path; not followed past itself)
 * into an OCI image layout in the empty directory layoutfd: one layer, a
 * pax tar under gzip with the tree's owners, modes, times and hard links
 * (device nodes, fifos and sockets left out: an image's unpacking drops
 * them anyway), a config (bootstrap.h) whose history says created_by,
 * a manifest, index.json and oci-layout. 0 or -errno with err.
 */
int bootstrap_pack(const char *rootfs, int layoutfd, const char *created_by, struct error *err);

#endif
