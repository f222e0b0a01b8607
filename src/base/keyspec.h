/* keyspec: the business idempotency key — templates compiled once, derived per message. */
#ifndef DEDUPD_KEYSPEC_H
#define DEDUPD_KEYSPEC_H

#include <stddef.h>

#include <jansson.h>

#include "base/record.h"
#include "dedupd/handler.h"

/** Keys longer than this are stored as "sha256:<hex>" of the full key so
 *  they always fit the unique index. */
#define KEYSPEC_MAX_KEY_LEN 512
/** What a hashed key starts with; a shorter key that starts so is hashed too. */
#define KEYSPEC_HASH_PREFIX "sha256:"

/** A template (subject, action or request) is at most this long and has at
 *  most this many parts: a key is an id, not a document. */
#define KEYSPEC_MAX_TEMPLATE_LEN 1024
#define KEYSPEC_MAX_PARTS 32

struct keyspec;

/**
 * Validate one template ("{json:order_id}", "PAY", "{header:request-id}",
 * "user-{key}"). Returns 0, or -1 with a message.
 */
int keyspec_template_check(const char *tmpl, char *err, size_t errsz);

/** Validate a JSON path as {json:PATH} and fingerprint.fields read it ("a.b[0].c"). */
int keyspec_path_check(const char *path, char *err, size_t errsz);

/** Compile subject, action and (optional, may be NULL) request. */
struct keyspec *keyspec_compile(const char *subject, const char *action, const char *request, char *err, size_t errsz);
void keyspec_free(struct keyspec *ks);

/** 1 when any part reads the JSON payload. */
int keyspec_needs_json(const struct keyspec *ks);

/** 1 when any part reads an AMQP property ({amqp:message_id}): only a
 *  RabbitMQ source has them. */
int keyspec_reads_amqp(const struct keyspec *ks);

/**
 * Derive "subject/action[/request]" into out (size outsz, at least
 * KEYSPEC_MAX_KEY_LEN + 1). Returns 0, or -1 with the reason in err
 * (payload not JSON, field missing or empty, header missing, invalid UTF-8).
 */
int keyspec_derive(const struct keyspec *ks, const struct record *in, char *out, size_t outsz, char *err, size_t errsz);

/**
 * keyspec_derive, and more: a key whose text is longer than max_text is
 * refused ("key of N bytes exceeds limits.key_bytes (M)"); when the key is
 * stored hashed, *text (when text is not NULL) is its full text (free() it),
 * else NULL.
 */
int keyspec_derive_text(const struct keyspec *ks, const struct record *in, size_t max_text, char *out, size_t outsz,
                        char **text, char *err, size_t errsz);

/** The form a key's text is stored in (out: at least KEYSPEC_MAX_KEY_LEN + 1):
 *  itself, or sha256:<hex> when longer than KEYSPEC_MAX_KEY_LEN or spelled
 *  like a hashed key. dedupctl inspect finds a key by its text this way. */
void keyspec_store_form(const char *text, size_t len, char *out, size_t outsz);

/**
 * The payload parsed as keys read it: strict JSON (no member given twice, no
 * integer beyond 64 bits). NULL with the reason in err.
 */
json_t *keyspec_load_json(const struct record *in, char *err, size_t errsz);

/* ---- one template on its own (a statement parameter) ---------------------- */

struct keytmpl;

/** Compile one template with the sources keys use ({json:PATH}, {header:NAME}, {key}, literals). */
struct keytmpl *keytmpl_compile(const char *src, char *err, size_t errsz);
void keytmpl_free(struct keytmpl *kt);
int keytmpl_needs_json(const struct keytmpl *kt);

/**
 * Render as is, into a new string (free() it): a source must be there and be
 * an exact scalar in valid UTF-8, as for keys, but it is not encoded and an
 * empty string is a value. root: from keyspec_load_json when the template
 * needs JSON. NULL with the reason in err.
 */
char *keytmpl_render(const struct keytmpl *kt, const struct record *in, json_t *root, char *err, size_t errsz);

/**
 * Fingerprint chosen fields of a JSON payload: SHA-256 (hex, 64 chars + NUL
 * into out) over each field's compact JSON encoding (keys sorted), "null"
 * for a missing field, separated by 0x1F. A payload that is not JSON is
 * fingerprinted whole.
 */
void keyspec_fingerprint(const json_t *paths, const void *value, size_t len, char out[65]);

#endif
