/* destination: whether JetStream could ever take a record dedupd writes to the outbox — a subject one can publish to. */
#ifndef DEDUPD_SOURCE_NATS_DESTINATION_H
#define DEDUPD_SOURCE_NATS_DESTINATION_H

#include <stddef.h>

#include "base/record.h"

/** Longest subject dedupd publishes to: the server's control line (PUB,
 *  subject, sizes) is 4 KiB by default. */
#define NATS_SUBJECT_MAX 3000

/** The header a record's key goes out as. */
#define NATS_RECORD_KEY_HEADER "dedupd.record.key"

/** 0 when rec's topic is a subject one can publish to (UTF-8, no white
 *  space or control characters, no empty token, no wildcard token * or >,
 *  at most NATS_SUBJECT_MAX bytes) and not the server's API ($JS.API...,
 *  $SYS...), and no header name of it begins another's (nats.c would send
 *  the two as one), else -1 and why (the sink's check). */
int nats_record_check(void *opaque, const struct record *rec, char *why, size_t whysz);

#endif
