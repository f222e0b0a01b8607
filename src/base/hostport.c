/* hostport: an address as http.listen writes it, "host:port" or "[v6]:port" — split, checked, and whether only this host can reach it. */
#include "base/hostport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int hostport_split(const char *s, char *host, size_t hostsz, char *port, size_t portsz, char *err, size_t errsz)
{
        const char *colon = strrchr(s, ':'), *h = s;
        size_t hl, pl;
        if (!colon || !colon[1]) {
                snprintf(err, errsz, "'%s' is not host:port (\"127.0.0.1:9400\", \"[::1]:9400\")", s);
                return -1;
        }
        hl = (size_t)(colon - s);
        if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
                h++;
                hl -= 2;
        } else if (memchr(s, ':', hl)) {
                snprintf(err, errsz, "'%s': an IPv6 address goes in brackets, \"[%.*s]:%s\"", s, (int)hl, s, colon + 1);
                return -1;
        }
        pl = strlen(colon + 1);
        long p = 0;
        for (const char *c = colon + 1; *c; c++)
                p = *c >= '0' && *c <= '9' && p <= 65535 ? p * 10 + (*c - '0') : 70000;
        if (pl > 5 || p > 65535) {
                snprintf(err, errsz, "'%s': the port must be a number from 0 to 65535", s);
                return -1;
        }
        if (hl >= hostsz || pl >= portsz) {
                snprintf(err, errsz, "'%s': the host is too long", s);
                return -1;
        }
        memcpy(host, h, hl);
        host[hl] = '\0';
        memcpy(port, colon + 1, pl + 1);
        return 0;
}

int hostport_check(const char *s, char *err, size_t errsz)
{
        char host[256], port[8];
        return *s ? hostport_split(s, host, sizeof(host), port, sizeof(port), err, errsz) : 0;
}

int hostport_loopback(const char *s)
{
        char host[256], port[8], err[256];
        struct in_addr a4;
        struct in6_addr a6;
        if (hostport_split(s, host, sizeof(host), port, sizeof(port), err, sizeof(err)))
                return 0;
        if (!strcasecmp(host, "localhost"))
                return 1;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &a6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
        return 0;
}
