/* tenant_name: what a tenant may be called — 1 to 64 of A-Z a-z 0-9 . _ - — so that it can lead a key before a ':' and be a metrics label as it is. */
#ifndef DEDUPD_BASE_TENANT_NAME_H
#define DEDUPD_BASE_TENANT_NAME_H

#include <stddef.h>

#define TENANT_NAME_MAX 64

/** 1 when s[0..n) is a tenant name. */
int tenant_name_ok(const char *s, size_t n);

#endif
