/* config_gen: a YAML configuration generated from the config table's own rows, each row's value chosen by the fuzzer's bytes. */
#ifndef DEDUPD_FUZZ_CONFIG_GEN_H
#define DEDUPD_FUZZ_CONFIG_GEN_H

#include <stddef.h>
#include <stdint.h>

/* Where a generated config points: every endpoint at one closed loopback port. */
struct gen_env {
        const char *kafka;    /* "127.0.0.1:PORT" */
        const char *conninfo; /* host=127.0.0.1 port=PORT ... connect_timeout=1 */
        const char *nats_url; /* nats://127.0.0.1:PORT */
        const char *amqp_url; /* amqp://u:p@127.0.0.1:PORT/v */
        const char *handler;  /* a real handler shared object */
        int number_rows;      /* a "# row N" comment above each row (to write a reproducer by hand) */
};

/**
 * The YAML text the bytes choose (malloc'd, NUL-terminated). Every row of
 * config_top_fields, the topics' and the classes' rows is visited in
 * order, numbered as visited; the bytes are a list of mutations, four
 * bytes each: a row's number, what becomes of it — a valid value, a null,
 * "", a list or a mapping where a scalar goes, an extreme or odd value,
 * the key twice, an unknown key beside it, deep nesting, an anchor or an
 * alias, a ${VAR}, or raw bytes — and two bytes for what it picks. A row
 * no mutation names is the baseline: no bytes at all is a config that
 * loads. *source receives the source the text names (its place in the broker table).
 */
char *gen_config(const uint8_t *data, size_t size, const struct gen_env *env, int *source);

/** Whether v is one of env's endpoint strings: only those may be contacted. */
int gen_env_endpoint(const struct gen_env *env, const char *v);

#endif
