/* msgid: the identity of an outbox message — derived from its namespace, its key and its place among what that key's message produced, never from a sequence. */
#include "base/msgid.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "base/hex.h"
#include "base/log.h"

/* One field of the hash input, ended by a NUL: no field holds one, so no two
 * different inputs are hashed as the same bytes. */
static void field(EVP_MD_CTX *sha, const char *s) { EVP_DigestUpdate(sha, s, strlen(s) + 1); }

/* The place as fields: "reply"; "emit", n; "reply", topic, partition, offset. */
static void place_fields(EVP_MD_CTX *sha, const struct msgid_place *p)
{
        char a[24], b[24];
        switch (p->slot) {
        case MSGID_REPLY: field(sha, "reply"); break;
        case MSGID_EMIT:
                snprintf(a, sizeof(a), "%d", p->ordinal);
                field(sha, "emit");
                field(sha, a);
                break;
        case MSGID_DUPLICATE_REPLY:
                snprintf(a, sizeof(a), "%" PRId32, p->partition);
                snprintf(b, sizeof(b), "%" PRId64, p->offset);
                field(sha, "reply");
                field(sha, p->topic ? p->topic : "");
                field(sha, a);
                field(sha, b);
                break;
        }
}

void msgid_derive(const char *ns, const char *key, const struct msgid_place *p, char out[MSGID_LEN + 1])
{
        unsigned char md[SHA256_DIGEST_LENGTH];
        unsigned int mdlen = 0;
        EVP_MD_CTX *sha = EVP_MD_CTX_new();
        if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL)) {
                /* Out of memory inside OpenSSL: as xmalloc, end the process. */
                log_error("outbox", "cannot hash a message id (out of memory): ending the process");
                abort();
        }
        field(sha, "dedupd.outbox.v1");
        field(sha, ns ? ns : "");
        field(sha, key ? key : "");
        place_fields(sha, p);
        EVP_DigestFinal_ex(sha, md, &mdlen);
        EVP_MD_CTX_free(sha);
        hex_encode(md, SHA256_DIGEST_LENGTH, out);
}

int msgid_valid(const char *s)
{
        size_t n = 0;
        for (; s && s[n]; n++)
                if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] > 0x7e || n >= MSGID_MAX)
                        return 0;
        return n > 0;
}
