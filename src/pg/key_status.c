/* key_status: where a key's row in dedupd.keys stands, as an enum — the store maps it to and from the text the column holds. */
#include "pg/key_status.h"

#include <string.h>

static const char *const names[] = {
        [KEY_PENDING] = "PENDING",
        [KEY_DONE] = "DONE",
        [KEY_FAILED] = "FAILED",
        [KEY_EXPIRED] = "EXPIRED",
};

const char *key_status_name(enum key_status status) { return names[status]; }

enum key_status key_status_parse(const char *text)
{
        for (size_t i = 0; text && i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(text, names[i]))
                        return (enum key_status)i;
        return KEY_PENDING;
}
