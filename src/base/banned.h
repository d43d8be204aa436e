/*
 * banned.h - calls agentbox never uses, turned into compile errors.
 *
 * Force-included into every translation unit by the build. Each of these
 * has a bounded or checked replacement:
 *   strcpy, strcat, sprintf, vsprintf -> snprintf / a length-checked copy
 *   strncpy, strncat                  -> snprintf: they truncate silently, and
 *                                        strncpy does not always terminate
 *   atoi, atol, atoll                 -> parse_u64() and friends (base/parse.h)
 *   system, popen                     -> never: no shell between us and exec
 *   gets                              -> fgets / read_all()
 *   tmpnam, mktemp                    -> mkstemp / mkdtemp
 */
#ifndef AGENTBOX_BANNED_H
#define AGENTBOX_BANNED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BANNED(func) sorry_##func##_is_banned_in_agentbox

#undef strcpy
#define strcpy(...) BANNED(strcpy)
#undef strcat
#define strcat(...) BANNED(strcat)
#undef strncpy
#define strncpy(...) BANNED(strncpy)
#undef strncat
#define strncat(...) BANNED(strncat)
#undef sprintf
#define sprintf(...) BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)
#undef atoi
#define atoi(...) BANNED(atoi)
#undef atol
#define atol(...) BANNED(atol)
#undef atoll
#define atoll(...) BANNED(atoll)
#undef system
#define system(...) BANNED(system)
#undef popen
#define popen(...) BANNED(popen)
#undef gets
#define gets(...) BANNED(gets)
#undef tmpnam
#define tmpnam(...) BANNED(tmpnam)
#undef mktemp
#define mktemp(...) BANNED(mktemp)

#endif
