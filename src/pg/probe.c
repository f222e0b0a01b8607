/* probe: whether an idle connection still reaches its server — a bounded SELECT 1 that never blocks the loop for long. */
#include "pg/probe.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

/* The connection failed the probe: counted like any failed statement (dedupd_db_errors_total). */
static enum store_rc lost(PGconn *conn, const char *what, char *err, size_t errsz)
{
        char why[400];
        store_error_text(why, sizeof(why), conn, NULL);
        snprintf(err, errsz, "%s: %s", what, why[0] ? why : "the connection is closed");
        store_classify(conn, NULL);
        return STORE_CONN;
}

/* Wait until conn has input (or can take output, when flushing) or deadline_ms passes: 0, or -1 timed out. */
static int await(PGconn *conn, int flushing, int64_t deadline_ms)
{
        for (;;) {
                int64_t left = deadline_ms - log_now_ms();
                if (left <= 0)
                        return -1;
                struct pollfd p = {.fd = PQsocket(conn), .events = POLLIN | (flushing ? POLLOUT : 0)};
                int n = poll(&p, 1, (int)left);
                if (n > 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return 0; /* let libpq's next read say what is wrong */
        }
}

/* The answer to the query sent: STORE_OK once every result is in and good. */
static enum store_rc answer(PGconn *conn, int timeout_ms, char *err, size_t errsz)
{
        int64_t deadline = log_now_ms() + timeout_ms;
        enum store_rc rc = STORE_OK;
        for (;;) {
                int flushing = PQflush(conn);
                if (flushing < 0)
                        return lost(conn, "sending SELECT 1", err, errsz);
                while (!flushing && !PQisBusy(conn)) {
                        PGresult *r = PQgetResult(conn);
                        if (!r)
                                return rc;
                        if (PQresultStatus(r) != PGRES_TUPLES_OK && rc == STORE_OK) {
                                store_error_text(err, errsz, conn, r);
                                rc = store_classify(conn, r);
                        }
                        PQclear(r);
                }
                if (await(conn, flushing, deadline)) {
                        snprintf(err, errsz, "SELECT 1 not answered within %d ms", timeout_ms);
                        store_classify(conn, NULL);
                        return STORE_CONN;
                }
                if (!PQconsumeInput(conn))
                        return lost(conn, "reading the answer to SELECT 1", err, errsz);
        }
}

enum store_rc store_probe(struct store *s, int timeout_ms, char *err, size_t errsz)
{
        PGconn *conn = store_conn(s);
        if (!conn) {
                snprintf(err, errsz, "not connected");
                return STORE_CONN;
        }
        if (PQstatus(conn) != CONNECTION_OK)
                return lost(conn, "the connection was lost", err, errsz);
        if (PQtransactionStatus(conn) != PQTRANS_IDLE)
                return STORE_OK;
        /* A server that ended the session (a shutdown, pg_terminate_backend)
         * said so on the socket already: read what is there, without waiting. */
        if (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK)
                return lost(conn, "the connection", err, errsz);
        if (!PQsendQuery(conn, "SELECT 1"))
                return lost(conn, "sending SELECT 1", err, errsz);
        return answer(conn, timeout_ms, err, errsz);
}
