/*
 * host.h - which isolation layers this host can give a sandbox.
 *
 * Read-only checks, safe to run at any time; `agentbox info` prints them
 * and agentbox refuses to start a sandbox without the required ones.
 */
#ifndef AGENTBOX_RUNTIME_HOST_H
#define AGENTBOX_RUNTIME_HOST_H

#include <stdbool.h>
#include <stddef.h>

struct host_features {
	char kernel[128];
	bool user_namespaces; /* required */
	int cgroup_version;   /* 1 or 2; 0 = unusable (required) */
	char cgroup_root[512];
	char cgroup_error[256];
	int landlock_abi; /* 0 = absent: the sandbox runs without that layer */
	bool seccomp;	  /* required */
	unsigned seccomp_instructions;
};

void host_probe(struct host_features *ret);

#endif
