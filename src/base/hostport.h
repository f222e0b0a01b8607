/* hostport: an address as http.listen writes it, "host:port" or "[v6]:port" — split, checked, and whether only this host can reach it. */
#ifndef DEDUPD_BASE_HOSTPORT_H
#define DEDUPD_BASE_HOSTPORT_H

#include <stddef.h>

/** Split s into host (brackets removed; "" for every interface) and port
 *  (decimal, 0..65535). 0, or -1 with the reason in err. */
int hostport_split(const char *s, char *host, size_t hostsz, char *port, size_t portsz, char *err, size_t errsz)
        __attribute__((warn_unused_result));

/** A config row's check: "" (nothing served) or an address hostport_split takes. */
int hostport_check(const char *s, char *err, size_t errsz);

/** 1 when s's host is a loopback address (127.0.0.0/8, ::1, localhost): only
 *  this host reaches it. 0 for every interface, any other address or name. */
int hostport_loopback(const char *s);

#endif
