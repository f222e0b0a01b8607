/* headers: AMQP headers and properties as dedupd's name/value pairs, and back — what keys read, what dead letters and the outbox carry. */
#ifndef DEDUPD_SOURCE_RABBITMQ_HEADERS_H
#define DEDUPD_SOURCE_RABBITMQ_HEADERS_H

#include <stddef.h>

#include <amqp.h>

#include "dedupd/handler.h"

/** Strings the pairs point into, freed together. */
struct rmq_strings {
        char **v;
        size_t cnt;
};
void rmq_strings_free(struct rmq_strings *s);

/**
 * The headers table as pairs ({header:NAME}): strings and byte arrays as
 * they are, numbers, booleans and timestamps as decimal text; nested tables
 * and arrays (x-death) are left out. *out is malloc'd, its names and values
 * kept in keep.
 */
size_t rmq_headers_read(const amqp_table_t *t, struct dedupd_header **out, struct rmq_strings *keep);

/** The basic properties a key may read ({amqp:message_id}, ...), those set. */
size_t rmq_props_read(const amqp_basic_properties_t *p, struct dedupd_header **out, struct rmq_strings *keep);

/**
 * A headers table of base's entries followed by extra (NULL values left out),
 * in pool. The table points into the entries: they must outlive it.
 */
amqp_table_t rmq_headers_table(const amqp_table_t *base, const struct dedupd_header *extra, size_t n,
                               amqp_pool_t *pool);

#endif
