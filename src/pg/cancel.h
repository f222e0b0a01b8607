/* cancel: what cancels the statement running on a store's connection, from another thread (the watchdog's). */
#ifndef DEDUPD_PG_CANCEL_H
#define DEDUPD_PG_CANCEL_H

#include <stddef.h>

struct store;
struct store_cancel;

/** A handle aimed at no connection yet. */
struct store_cancel *store_cancel_new(void);
/** Free (NULL is fine). */
void store_cancel_free(struct store_cancel *c);

/** Aim c at s's connection as it is now (at none when s is not connected);
 *  called on the thread that uses s. c is not to be sent meanwhile: the
 *  caller serialises the two. */
void store_cancel_aim(struct store_cancel *c, const struct store *s);

/** Ask the server to cancel the statement running on the connection c was
 *  aimed at; safe from any thread. 0 (also when aimed at none), or -1 and why. */
int store_cancel_send(struct store_cancel *c, char *err, size_t errsz);

#endif
