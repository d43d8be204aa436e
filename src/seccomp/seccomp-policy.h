/*
 * seccomp-policy.h - the sandbox policy as libseccomp rules (build time only).
 *
 * Used by the seccomp-gen tool, never by the runtime: the runtime only sees
 * the BPF program that seccomp-gen bakes from this policy.
 */
#ifndef AGENTBOX_SECCOMP_SECCOMP_POLICY_H
#define AGENTBOX_SECCOMP_SECCOMP_POLICY_H

#include <seccomp.h>

/*
 * Build the policy for x86_64 into a new libseccomp context.
 * On success stores the context (free it with seccomp_release()) and the
 * number of rules added, and returns 0. On failure, which includes a
 * syscall name unknown both to libseccomp and to the policy's own table of
 * late additions, prints why to stderr and returns -errno: a policy that
 * does not say exactly what it means must fail the build.
 */
int seccomp_policy_new(scmp_filter_ctx *ret_ctx, unsigned *ret_rules);

#endif
