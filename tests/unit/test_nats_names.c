/* test_nats_names: what the NATS source says and names — URLs with their credentials cut out, each topic's consumer name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "source/nats/settings.h"
#include "base/config.h"
#include "source/nats/link.h"

struct redact_case {
        const char *url, *shown;
};

static const struct redact_case redact_cases[] = {
        {"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
        {"nats://dedupd:S3cret@n1:4222", "nats://n1:4222"},
        {"tls://t0ken@n1:4222", "tls://n1:4222"},
        {"nats://a:b@n1:4222,nats://n2:4222,nats://c:d@n3:4222", "nats://n1:4222,nats://n2:4222,nats://n3:4222"},
        {"u:p@n1:4222", "n1:4222"},
        {"", ""},
};

static void redact_cuts_every_userinfo(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(redact_cases) / sizeof(redact_cases[0]); i++) {
                char buf[256];
                assert_string_equal(nats_link_redact(redact_cases[i].url, buf, sizeof(buf)), redact_cases[i].shown);
        }
}

static void consumer_names_are_legal_and_per_topic(void **state)
{
        (void)state;
        struct config_errors errs = {0};
        struct config *cfg = config_load_string(
                "t.yaml",
                "namespace: shop\nsource: nats\npostgres: {conninfo: host=db}\nnats: {stream: S}\n"
                "topics:\n  - name: orders.*.pay\n    key: {subject: \"{json:id}\"}\n    handler: {path: h.so}\n"
                "  - name: refunds.>\n    key: {subject: \"{json:id}\"}\n    handler: {path: h.so}\n",
                &errs);
        char a[256], b[256];
        assert_non_null(cfg);
        assert_string_equal(nats_consumer_name(cfg, 0, a, sizeof(a)), "dedupd-shop-orders___pay");
        assert_string_equal(nats_consumer_name(cfg, 1, b, sizeof(b)), "dedupd-shop-refunds__");
        struct nats_settings *n = config_broker_settings(cfg);
        free(n->durable);
        n->durable = strdup("billing");
        assert_string_equal(nats_consumer_name(cfg, 0, a, sizeof(a)), "billing-orders___pay");
        config_free(cfg);
}

int main(void)
{
        static const struct CMUnitTest tests[] = {
                cmocka_unit_test(redact_cuts_every_userinfo),
                cmocka_unit_test(consumer_names_are_legal_and_per_topic),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
