/* layout: dedupd.keys or dedupd.keys_p, and the statements said of the one in use (pg/layout.h). */
#include "pg/layout.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/mem.h"
#include "base/strbuf.h"

#define HEAP_NAME "dedupd.keys"
#define PARTITIONED_NAME "dedupd.keys_p"

static enum keys_layout layout = KEYS_HEAP;

void keys_layout_set(enum keys_layout l) { layout = l; }
enum keys_layout keys_layout_get(void) { return layout; }
const char *keys_layout_table(void) { return layout == KEYS_PARTITIONED ? PARTITIONED_NAME : HEAP_NAME; }

void keys_layout_from_config(const struct config *cfg)
{
        keys_layout_set(cfg->keys_layout == LAYOUT_PARTITIONED ? KEYS_PARTITIONED : KEYS_HEAP);
}

static int name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The next place sql names dedupd.keys itself, or NULL. */
static const char *next_name(const char *sql)
{
        const char *p = sql;
        size_t n = strlen(HEAP_NAME);
        while ((p = strstr(p, HEAP_NAME))) {
                if (!name_char(p[n]) && (p == sql || !name_char(p[-1])))
                        return p;
                p += n;
        }
        return NULL;
}

char *keys_layout_rewrite(const char *sql)
{
        struct strbuf b = {0};
        const char *at;
        while ((at = next_name(sql))) {
                strbuf_add(&b, sql, (size_t)(at - sql));
                strbuf_adds(&b, PARTITIONED_NAME);
                sql = at + strlen(HEAP_NAME);
        }
        strbuf_adds(&b, sql);
        return b.p;
}

/* Statements said of dedupd.keys_p, by their text: a few dozen distinct
 * texts, shared by every connection of the process (workers' too). */
struct said {
        uint64_t hash;
        char *text, *rewritten;
};
static struct said *said;
static size_t nsaid, capsaid;
static pthread_mutex_t said_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t text_hash(const char *s)
{
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h;
}

const char *keys_layout_sql(const char *sql)
{
        const char *out = NULL;
        if (layout == KEYS_HEAP || !next_name(sql))
                return sql;
        uint64_t h = text_hash(sql);
        pthread_mutex_lock(&said_lock);
        for (size_t i = 0; i < nsaid && !out; i++)
                if (said[i].hash == h && !strcmp(said[i].text, sql))
                        out = said[i].rewritten;
        if (!out) {
                if (nsaid == capsaid) {
                        capsaid = capsaid ? capsaid * 2 : 64;
                        said = xrealloc(said, capsaid * sizeof(*said));
                }
                said[nsaid] = (struct said){h, xstrdup(sql), keys_layout_rewrite(sql)};
                out = said[nsaid++].rewritten;
        }
        pthread_mutex_unlock(&said_lock);
        return out;
}
