/* tenant_name: what a tenant may be called — 1 to 64 of A-Z a-z 0-9 . _ - — so that it can lead a key before a ':' and be a metrics label as it is. */
#include "base/tenant_name.h"

int tenant_name_ok(const char *s, size_t n)
{
        if (n < 1 || n > TENANT_NAME_MAX)
                return 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-'))
                        return 0;
        }
        return 1;
}
