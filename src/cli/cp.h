/*
 * cp.h - copies between here and an interactive sandbox, through the
 * files API: one file (verb-cp.c) and, for cp -r, a directory as one tar
 * (cp-tree.c, with the host's tar).
 *
 * Every function prints its one line on stderr ("agentbox: cp: ...")
 * when it fails, and returns 0 or EXIT_AGENTBOX (cli.h), or, for cp -r
 * on a host without tar, CP_EXIT_NO_TAR.
 */
#ifndef AGENTBOX_CLI_CP_H
#define AGENTBOX_CLI_CP_H

#include "client/client.h"

/* The most entries cp -r copies, and how deep it goes (the API's limits too). */
#define CP_TREE_ENTRIES_MAX 100000
#define CP_TREE_DEPTH_MAX   64
/* cp -r's exit status when the host has no tar to run. */
#define CP_EXIT_NO_TAR 127

/* ID:PATH; path is borrowed from argv or the caller. */
struct cp_remote {
	char id[CLIENT_ID_MAX + 1];
	const char *path;
};

/* One file, local into rem (a path ending in / gets local's name). */
int cp_file_in(struct client *c, const char *local, const struct cp_remote *rem);

/* One file, rem into local (an existing directory gets rem's name). */
int cp_file_out(struct client *c, const struct cp_remote *rem, const char *local);

/*
 * cp -r: directory local becomes directory rem->path of the sandbox (one
 * ending in / gets local's name inside it), and the other way (an
 * existing directory local gets rem's name inside it), as one tar made or
 * unpacked by the host's tar. Regular files and directories are copied;
 * a symlink or anything else is left out with a line on stderr (out of
 * the sandbox: one line with agentboxd's count). At most
 * CP_TREE_ENTRIES_MAX entries, CP_TREE_DEPTH_MAX deep, a tar of 256 MiB.
 * The first failure stops the copy; what was written stays.
 */
int cp_tree_in(struct client *c, const char *local, const struct cp_remote *rem);
int cp_tree_out(struct client *c, const struct cp_remote *rem, const char *local);

/*
 * Make directory path of sandbox id, and its parents: the API has no
 * route for a directory, so an empty file is written inside it (a PUT
 * makes the parents of what it writes) and removed. 0 or -errno with err.
 */
int cp_sandbox_mkdir(struct client *c, const char *id, const char *path, struct error *err);

#endif
