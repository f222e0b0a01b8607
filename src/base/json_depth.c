/* json_depth: how deep a payload's JSON nests, counted on its bytes before any parser sees them (limits.json_depth). */
#include "base/json_depth.h"

size_t json_depth_over(const void *value, size_t len, size_t limit)
{
        const unsigned char *p = value;
        size_t depth = 0;
        int in_str = 0;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = p[i];
                if (in_str) {
                        if (c == '\\')
                                i++; /* whatever is escaped, it is not a quote */
                        else if (c == '"')
                                in_str = 0;
                } else if (c == '"') {
                        in_str = 1;
                } else if (c == '[' || c == '{') {
                        if (++depth > limit)
                                return depth;
                } else if ((c == ']' || c == '}') && depth) {
                        depth--;
                }
        }
        return 0;
}
