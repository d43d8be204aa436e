/*
 * cp.h - copies between here and an interactive sandbox, through the
 * files API: one file (verb-cp.c) and, for cp -r, a directory walked
 * and copied file by file (cp-tree.c).
 *
 * Every function prints its one line on stderr ("agentbox: cp: ...")
 * when it fails, and returns 0 or EXIT_AGENTBOX (cli.h).
 */
#ifndef AGENTBOX_CLI_CP_H
#define AGENTBOX_CLI_CP_H

#include "client/client.h"

/* The most entries cp -r copies, and how deep it goes. */
#define CP_TREE_ENTRIES_MAX 100000
#define CP_TREE_DEPTH_MAX   64

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
 * ending in / gets local's name inside it), and the other way. Regular
 * files and directories are copied; a symlink or anything else is left
 * out with a line on stderr. At most CP_TREE_ENTRIES_MAX entries,
 * CP_TREE_DEPTH_MAX deep. The first failure stops the copy.
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
