/* msg_state: the protocol's state of each message a source hands over — kept by the runner beside the message, across every attempt of its batch, in a pool that allocates nothing per message. */
#include "core/msg_state.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#define SLAB_ENTRIES 256

/* An entry, and its link while it is free (e first: a node is its entry). */
struct pl_pool_node {
        struct pl_entry e;
        struct pl_pool_node *next;
};

struct pl_pool_slab {
        struct pl_pool_slab *next;
        struct pl_pool_node nodes[SLAB_ENTRIES];
};

void pl_state_clear(struct pl_state *st)
{
        free(st->idem_key);
        free(st->key_text);
        free(st->prev_key);
        free(st->tenant);
        free(st->dlq_reason);
        free(st->fail_reason);
        memset(st, 0, sizeof(*st));
}

/* One slab more, its nodes on the free list. */
static void pool_grow(struct pl_pool *p)
{
        struct pl_pool_slab *s = xcalloc(1, sizeof(*s));
        s->next = p->slabs;
        p->slabs = s;
        for (size_t i = 0; i < SLAB_ENTRIES; i++) {
                s->nodes[i].next = p->free;
                p->free = &s->nodes[i];
        }
}

struct pl_entry *pl_pool_take(struct pl_pool *p, struct pl_msg *m)
{
        if (!p->free)
                pool_grow(p);
        struct pl_pool_node *n = p->free;
        p->free = n->next;
        n->next = NULL;
        n->e.msg = m;
        return &n->e;
}

struct pl_msg *pl_pool_give(struct pl_pool *p, struct pl_entry *e)
{
        struct pl_pool_node *n = (struct pl_pool_node *)e;
        struct pl_msg *m = e->msg;
        pl_state_clear(&e->st);
        e->msg = NULL;
        n->next = p->free;
        p->free = n;
        return m;
}

void pl_pool_free(struct pl_pool *p)
{
        while (p->slabs) {
                struct pl_pool_slab *s = p->slabs;
                p->slabs = s->next;
                for (size_t i = 0; i < SLAB_ENTRIES; i++)
                        pl_state_clear(&s->nodes[i].e.st);
                free(s);
        }
        p->free = NULL;
}
