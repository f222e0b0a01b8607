/* test_loader: a handler shared object is refused before anything of it runs
 * unless it is built for this dedupd, and the refusal says exactly why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/config.h"
#include "core/loader.h"
#include "unit.h"

#include "fixture.h"

#if !defined(FIXTURE_GOOD) || !defined(FIXTURE_DIR)
#error "fixture paths must be defined by the build"
#endif

#define MIN_DESC_SIZE (offsetof(struct dedupd_handler, fini) + sizeof(void (*)(void *)))

static void assert_zeroed(const struct handler *h)
{
        assert_null(h->path);
        assert_null(h->dl);
        assert_null(h->desc);
        assert_null(h->state);
        assert_int_equal(h->initialized, 0);
}

/* Opening path must fail; returns the message. */
static void open_fails(const char *path, char *err, size_t errsz)
{
        struct handler h;
        err[0] = '\0';
        if (loader_open(&h, path, err, errsz) == 0) {
                loader_close(&h);
                fail_msg("%s was accepted", path);
        }
        assert_true(err[0] != '\0');
        assert_zeroed(&h); /* nothing left to clean up... */
        loader_close(&h);  /* ...and closing anyway is harmless */
}

static json_t *json(const char *text)
{
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        if (!j)
                fail_msg("bad test JSON %s: %s", text, jerr.text);
        return j;
}

/* {"fini_counter": "<address of counter>", ...more} */
static json_t *config_with_counter(int *counter, const char *more)
{
        char buf[512];
        snprintf(buf, sizeof(buf), "{\"fini_counter\": \"%jx\"%s%s}", (uintmax_t)(uintptr_t)counter, more ? ", " : "",
                 more ? more : "");
        return json(buf);
}

/* ---- a good handler ------------------------------------------------------------ */

static void open_good(void **state)
{
        struct handler h;
        char err[1024] = "";

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        assert_string_equal(h.path, FIXTURE_GOOD);
        assert_non_null(h.dl);
        assert_non_null(h.desc);
        assert_int_equal(h.desc->abi_major, DEDUPD_HANDLER_ABI_MAJOR);
        assert_string_equal(h.desc->name, "good");
        assert_non_null(h.desc->handle);
        assert_string_equal(h.log_prefix, "handler:good");
        assert_int_equal(h.initialized, 0); /* open runs nothing but the descriptor function */
        assert_null(h.state);
        loader_close(&h);
        assert_zeroed(&h);
}

static void init_with_empty_config(void **state)
{
        struct handler h;
        char err[1024] = "";
        json_t *cfg = json("{}");

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        assert_int_equal(loader_init(&h, cfg, NULL, NULL, NULL, err, sizeof(err)), 0);
        assert_int_equal(h.initialized, 1);
        assert_non_null(h.state);
        assert_string_equal(((struct fixture_state *)h.state)->greeting, "(none)");
        loader_close(&h);
        assert_zeroed(&h);
        json_decref(cfg);
}

static void init_without_config(void **state)
{
        struct handler h;
        char err[1024] = "";

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        if (loader_init(&h, NULL, NULL, NULL, NULL, err, sizeof(err)))
                fail_msg("%s", err);
        assert_string_equal(((struct fixture_state *)h.state)->greeting, "(none)");
        loader_close(&h);
}

static void init_reads_config_and_fini_runs_once(void **state)
{
        struct handler h;
        char err[1024] = "";
        int fini_calls = 0;
        json_t *cfg = config_with_counter(&fini_calls, "\"greeting\": {\"text\": \"hello\"}");

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        if (loader_init(&h, cfg, NULL, NULL, NULL, err, sizeof(err)))
                fail_msg("%s", err);
        assert_string_equal(((struct fixture_state *)h.state)->greeting, "hello");
        assert_int_equal(fini_calls, 0);
        loader_close(&h);
        assert_int_equal(fini_calls, 1);
        assert_zeroed(&h);
        loader_close(&h); /* a second close does not call fini again */
        assert_int_equal(fini_calls, 1);
        json_decref(cfg);
}

static void init_failure_is_reported(void **state)
{
        struct handler h;
        char err[1024] = "", want[1024];
        json_t *cfg = json("{\"fail\": \"yes\"}");

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        assert_int_equal(loader_init(&h, cfg, NULL, NULL, NULL, err, sizeof(err)), -1);
        snprintf(want, sizeof(want), "handler %s: init failed: told to fail", FIXTURE_GOOD);
        assert_string_equal(err, want);
        assert_int_equal(h.initialized, 0);
        loader_close(&h);
        assert_zeroed(&h);
        json_decref(cfg);
}

static void init_failure_without_message(void **state)
{
        struct handler h;
        char err[1024] = "";
        json_t *cfg = json("{\"fail\": \"silently\"}");

        if (loader_open(&h, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        assert_int_equal(loader_init(&h, cfg, NULL, NULL, NULL, err, sizeof(err)), -1);
        assert_contains(err, "init failed: (no message)");
        loader_close(&h);
        json_decref(cfg);
}

/* The handler sees exactly the `config:` subtree of its topic in the YAML. */
static void init_with_config_from_yaml(void **state)
{
        struct config_errors errs = {0};
        struct handler h;
        char err[1024] = "";
        struct config *cfg = config_load_string("t.yaml",
                                                "namespace: svc\n"
                                                "postgres: {conninfo: \"dbname=x\"}\n"
                                                "kafka: {bootstrap.servers: \"b:9092\", group.id: g}\n"
                                                "topics:\n"
                                                "  - name: t\n"
                                                "    key: {subject: \"{key}\"}\n"
                                                "    handler:\n"
                                                "      path: \"" FIXTURE_GOOD "\"\n"
                                                "      config:\n"
                                                "        greeting:\n"
                                                "          text: from yaml\n",
                                                &errs);
        for (size_t i = 0; i < errs.cnt; i++)
                print_message("%s\n", errs.msgs[i]);
        assert_non_null(cfg);
        struct topic_conf *t = config_topic(cfg, "t");
        if (loader_open(&h, t->handler_path, err, sizeof(err)))
                fail_msg("%s", err);
        if (loader_init(&h, t->handler_config, NULL, NULL, NULL, err, sizeof(err)))
                fail_msg("%s", err);
        assert_string_equal(((struct fixture_state *)h.state)->greeting, "from yaml");
        loader_close(&h);
        config_free(cfg);
}

/* Two topics may use the same handler: one library, two independent states. */
static void same_handler_twice(void **state)
{
        struct handler a, b;
        char err[1024] = "";
        int fini_calls = 0;
        json_t *ca = config_with_counter(&fini_calls, "\"greeting\": {\"text\": \"a\"}");
        json_t *cb = config_with_counter(&fini_calls, "\"greeting\": {\"text\": \"b\"}");

        if (loader_open(&a, FIXTURE_GOOD, err, sizeof(err)) || loader_open(&b, FIXTURE_GOOD, err, sizeof(err)))
                fail_msg("%s", err);
        if (loader_init(&a, ca, NULL, NULL, NULL, err, sizeof(err)) ||
            loader_init(&b, cb, NULL, NULL, NULL, err, sizeof(err)))
                fail_msg("%s", err);
        assert_ptr_equal(a.desc, b.desc);
        assert_ptr_not_equal(a.state, b.state);
        loader_close(&a);
        assert_int_equal(fini_calls, 1);
        /* b's library stays loaded while b is open */
        assert_string_equal(((struct fixture_state *)b.state)->greeting, "b");
        assert_string_equal(b.desc->name, "good");
        loader_close(&b);
        assert_int_equal(fini_calls, 2);
        json_decref(ca);
        json_decref(cb);
}

/* Only handle_batch(), no init() and no fini(), no name: all allowed. */
static void batch_only_handler(void **state)
{
        struct handler h;
        char err[1024] = "", want[256];

        if (loader_open(&h, FIXTURE_BATCH_ONLY, err, sizeof(err)))
                fail_msg("%s", err);
        assert_null(h.desc->handle);
        assert_non_null(h.desc->handle_batch);
        snprintf(want, sizeof(want), "handler:%s", FIXTURE_BATCH_ONLY);
        assert_string_equal(h.log_prefix, want); /* no name: the path stands in */
        assert_int_equal(loader_init(&h, NULL, NULL, NULL, NULL, err, sizeof(err)), 0);
        assert_int_equal(h.initialized, 1);
        loader_close(&h);
        assert_zeroed(&h);
}

/* The config reference says relative paths are relative to the working
 * directory; dlopen() only does that when the name contains a slash. */
static void relative_paths_are_relative_to_cwd(void **state)
{
        struct handler h;
        char err[1024] = "", *cwd = getcwd(NULL, 0);

        assert_non_null(cwd);
        assert_int_equal(chdir(FIXTURE_DIR), 0);
        int rc1 = loader_open(&h, "./fixture_good.so", err, sizeof(err));
        if (rc1 == 0)
                loader_close(&h);
        else
                print_message("./fixture_good.so: %s\n", err);
        int rc2 = loader_open(&h, "fixture_good.so", err, sizeof(err));
        if (rc2 == 0) {
                assert_string_equal(h.desc->name, "good");
                assert_string_equal(h.path, "fixture_good.so");
                loader_close(&h);
        } else {
                print_message("fixture_good.so: %s\n", err);
        }
        assert_int_equal(chdir(cwd), 0);
        free(cwd);
        assert_int_equal(rc1, 0);
        assert_int_equal(rc2, 0);
}

/* ---- refused handlers ---------------------------------------------------------- */

static void wrong_abi(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_WRONG_ABI, err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: ABI major version %d, but this dedupd speaks ABI %d",
                 FIXTURE_WRONG_ABI, DEDUPD_HANDLER_ABI_MAJOR + 1, DEDUPD_HANDLER_ABI_MAJOR);
        assert_prefix(err, want);
        assert_contains(err, "ABI major version 2");
        assert_contains(err, "speaks ABI 1");
        assert_contains(err, "rebuild the handler");
}

static void small_descriptor(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_SMALL_DESC, err, sizeof(err));
        snprintf(want, sizeof(want),
                 "handler %s: descriptor size 8 bytes is smaller than the %zu bytes ABI %d requires",
                 FIXTURE_SMALL_DESC, (size_t)MIN_DESC_SIZE, DEDUPD_HANDLER_ABI_MAJOR);
        assert_prefix(err, want);
}

static void missing_symbol(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_MISSING_SYMBOL, err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: missing symbol dedupd_handler_descriptor()", FIXTURE_MISSING_SYMBOL);
        assert_prefix(err, want);
        assert_contains(err, "DEDUPD_HANDLER_EXPORT");
}

static void no_handle(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_NO_HANDLE, err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: descriptor has neither handle() nor handle_batch()",
                 FIXTURE_NO_HANDLE);
        assert_string_equal(err, want);
}

static void null_descriptor(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_NULL_DESC, err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: dedupd_handler_descriptor() returned NULL", FIXTURE_NULL_DESC);
        assert_string_equal(err, want);
}

static void undefined_reference(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_UNDEFINED_REF, err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: cannot load: ", FIXTURE_UNDEFINED_REF);
        assert_prefix(err, want);
        assert_contains(err, "undefined symbol");
        assert_contains(err, "dedupd_fixture_undefined_function");
}

static void nonexistent_path(void **state)
{
        char err[1024], want[256];

        open_fails(FIXTURE_DIR "/no-such-handler.so", err, sizeof(err));
        snprintf(want, sizeof(want), "handler %s: cannot load: ", FIXTURE_DIR "/no-such-handler.so");
        assert_prefix(err, want);
        assert_contains(err, "No such file or directory");
}

static void not_a_shared_object(void **state)
{
        char path[] = "/tmp/dedupd-test-handler-XXXXXX", err[1024], want[256];
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, "#!/bin/sh\necho not a library\n", 29), 29);
        close(fd);
        open_fails(path, err, sizeof(err));
        unlink(path);
        snprintf(want, sizeof(want), "handler %s: cannot load: ", path);
        assert_prefix(err, want);
}

static void small_error_buffer(void **state)
{
        char err[24];

        memset(err, 'z', sizeof(err));
        open_fails(FIXTURE_WRONG_ABI, err, 16);
        assert_int_equal(strlen(err), 15);
        assert_int_equal(err[16], 'z');
}

int main(void)
{
        static const struct CMUnitTest tests[] = {
                cmocka_unit_test(open_good),
                cmocka_unit_test(init_with_empty_config),
                cmocka_unit_test(init_without_config),
                cmocka_unit_test(init_reads_config_and_fini_runs_once),
                cmocka_unit_test(init_failure_is_reported),
                cmocka_unit_test(init_failure_without_message),
                cmocka_unit_test(init_with_config_from_yaml),
                cmocka_unit_test(same_handler_twice),
                cmocka_unit_test(batch_only_handler),
                cmocka_unit_test(relative_paths_are_relative_to_cwd),
                cmocka_unit_test(wrong_abi),
                cmocka_unit_test(small_descriptor),
                cmocka_unit_test(missing_symbol),
                cmocka_unit_test(no_handle),
                cmocka_unit_test(null_descriptor),
                cmocka_unit_test(undefined_reference),
                cmocka_unit_test(nonexistent_path),
                cmocka_unit_test(not_a_shared_object),
                cmocka_unit_test(small_error_buffer),
        };
        struct handler zero = {0};

        loader_close(&zero); /* safe on a zeroed struct */
        return cmocka_run_group_tests_name("loader", tests, NULL, NULL);
}
