/* stmt_cache: a handler's statements (host->exec) prepared on their connection once seen twice, so each is parsed and planned once a session rather than once a batch. Bounded: a handler that builds a new text each time runs it unprepared. */
#include "pg/stmt_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

/* Texts remembered, prepared or seen once; longer texts are never kept. */
#define SEEN_MAX 64
#define SQL_MAX 16384

struct entry {
        char *sql;
        int nparams;
        int name; /* prepared as "dedupd_h<name>"; -1: seen once, not prepared */
};

struct stmt_cache {
        struct entry e[SEEN_MAX];
        size_t n;
        int names;   /* names given on this session (a statement dropped keeps its name taken) */
        size_t next; /* the slot a text seen once replaces when every slot is taken */
};

struct stmt_cache *stmt_cache_new(void) { return xcalloc(1, sizeof(struct stmt_cache)); }

void stmt_cache_forget(struct stmt_cache *c)
{
        for (size_t i = 0; i < c->n; i++)
                free(c->e[i].sql);
        *c = (struct stmt_cache){0};
}

void stmt_cache_free(struct stmt_cache *c)
{
        if (!c)
                return;
        stmt_cache_forget(c);
        free(c);
}

static struct entry *find(struct stmt_cache *c, const char *sql, int nparams)
{
        for (size_t i = 0; i < c->n; i++)
                if (c->e[i].nparams == nparams && !strcmp(c->e[i].sql, sql))
                        return &c->e[i];
        return NULL;
}

/* sql seen once: in a free slot, else in place of another text seen once
 * (round robin); not at all when every slot holds a prepared statement. */
static void remember(struct stmt_cache *c, const char *sql, int nparams)
{
        struct entry *e = NULL;
        if (strlen(sql) > SQL_MAX)
                return;
        if (c->n < SEEN_MAX)
                e = &c->e[c->n++];
        for (size_t tries = 0; !e && tries < SEEN_MAX; tries++, c->next = (c->next + 1) % SEEN_MAX)
                if (c->e[c->next].name < 0)
                        e = &c->e[c->next];
        if (!e)
                return;
        free(e->sql);
        *e = (struct entry){.sql = xstrdup(sql), .nparams = nparams, .name = -1};
}

/* A prepared statement the server no longer runs as it was prepared: gone
 * (26000, a handler's DEALLOCATE or DISCARD) or its result's columns
 * changed by DDL (0A000, "cached plan must not change result type"). The
 * next run prepares it again, under a new name. */
static void drop_if_stale(struct entry *e, const PGresult *r)
{
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (state && (!strcmp(state, "26000") || !strcmp(state, "0A000")))
                e->name = -1;
}

PGresult *stmt_cache_exec(struct stmt_cache *c, PGconn *conn, const char *sql, int nparams, const char *const *params)
{
        struct entry *e = find(c, sql, nparams);
        char name[32];
        if (!e || (e->name < 0 && c->names == STMT_CACHE_PREPARED)) {
                if (!e)
                        remember(c, sql, nparams);
                return PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
        }
        if (e->name < 0) {
                snprintf(name, sizeof(name), "dedupd_h%d", c->names);
                PGresult *r = PQprepare(conn, name, sql, nparams, NULL);
                if (PQresultStatus(r) != PGRES_COMMAND_OK)
                        return r;
                PQclear(r);
                e->name = c->names++;
        }
        snprintf(name, sizeof(name), "dedupd_h%d", e->name);
        PGresult *r = PQexecPrepared(conn, name, nparams, params, NULL, NULL, 0);
        if (PQresultStatus(r) == PGRES_FATAL_ERROR)
                drop_if_stale(e, r);
        return r;
}
