/* test_destinations: what each broker could never take as a record dedupd writes to the outbox — names, keys, internal destinations. */
#include <stdio.h>
#include <string.h>

#include "source/kafka/destination.h"
#include "source/nats/destination.h"
#include "source/rabbitmq/destination.h"
#include "unit.h"

struct dest_case {
        int (*check)(void *, const struct record *, char *, size_t);
        const char *topic, *key;
        int ok;
        const char *why; /* part of the reason when refused */
};

static char long_name[400];

static const struct dest_case cases[] = {
        {kafka_record_check, "replies", NULL, 1, NULL},
        {kafka_record_check, "a.b_c-D9", NULL, 1, NULL},
        {kafka_record_check, "", NULL, 0, "1 to 249"},
        {kafka_record_check, "has space", NULL, 0, "only letters"},
        {kafka_record_check, "caf\xc3\xa9", NULL, 0, "only letters"},
        {kafka_record_check, "..", NULL, 0, "not a legal"},
        {kafka_record_check, "__consumer_offsets", NULL, 0, "internal"},
        {kafka_record_check, long_name, NULL, 0, "1 to 249"},
        {nats_record_check, "replies.orders", NULL, 1, NULL},
        {nats_record_check, "_INBOX.abc", NULL, 1, NULL},
        {nats_record_check, "a..b", NULL, 0, "empty token"},
        {nats_record_check, ".a", NULL, 0, "empty token"},
        {nats_record_check, "a.*", NULL, 0, "wildcard"},
        {nats_record_check, "a.>", NULL, 0, "wildcard"},
        {nats_record_check, "a b", NULL, 0, "white space"},
        {nats_record_check, "a\tb", NULL, 0, "white space"},
        {nats_record_check, "\xff\xfe", NULL, 0, "UTF-8"},
        {nats_record_check, "$JS.API.STREAM.DELETE.S", NULL, 0, "server's own API"},
        {rmq_record_check, "replies", "c1", 1, NULL},
        {rmq_record_check, "amq.topic", "any.key", 1, NULL},
        {rmq_record_check, "\xc3\x28", NULL, 0, "UTF-8"},
        {rmq_record_check, "", NULL, 0, "1 to 255"},
        {rmq_record_check, "replies", long_name, 0, "routing key"},
        {rmq_record_check, long_name, NULL, 0, "1 to 255"},
};

static void each_broker_names_what_it_refuses(void **state)
{
        (void)state;
        memset(long_name, 'x', 300);
        long_name[300] = '\0';
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct dest_case *c = &cases[i];
                struct record r = {.topic = c->topic, .key = c->key, .key_len = c->key ? strlen(c->key) : 0};
                char why[256] = "";
                int rc = c->check(NULL, &r, why, sizeof(why));
                if ((rc == 0) != c->ok)
                        fail_msg("case %zu (%.40s): expected %s, got %s (%s)", i, c->topic, c->ok ? "ok" : "refused",
                                 rc ? "refused" : "ok", why);
                if (!c->ok)
                        assert_contains(why, c->why);
        }
}

/* Header names one of which begins the other: nats.c would send them as one
 * header (the second a value of the first), so the record is refused. */
static void nats_refuses_headers_it_would_merge(void **state)
{
        (void)state;
        static const struct {
                const char *a, *b;
                int ok;
        } pairs[] = {
                {"emitted-by", "emit", 0},
                {"emit", "emitted-by", 0},
                {"dedupd.record", "x", 0}, /* beside the key's */
                {"emitted-by", "emit-no", 1},
                {"x-one", "x-two", 1},
                {"ab", "ba", 1},
        };
        for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
                struct dedupd_header h[2] = {{pairs[i].a, "1", 1}, {pairs[i].b, "2", 1}};
                struct record r = {.topic = "events.x", .key = "k", .key_len = 1, .headers = h, .header_cnt = 2};
                char why[256] = "";
                int rc = nats_record_check(NULL, &r, why, sizeof(why));
                if ((rc == 0) != pairs[i].ok)
                        fail_msg("headers %s, %s: expected %s, got %s (%s)", pairs[i].a, pairs[i].b,
                                 pairs[i].ok ? "ok" : "refused", rc ? "refused" : "ok", why);
                if (!pairs[i].ok)
                        assert_contains(why, "one name begins the other");
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {cmocka_unit_test(each_broker_names_what_it_refuses),
                                           cmocka_unit_test(nats_refuses_headers_it_would_merge)};
        return cmocka_run_group_tests(tests, NULL, NULL);
}
