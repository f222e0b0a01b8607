/* commands: what each dedupctl command does, once its arguments are read — the functions dedupctl's command table names. */
#ifndef DEDUPD_TOOLS_COMMANDS_H
#define DEDUPD_TOOLS_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "source/replay.h"
#include "tools/dupes.h"
#include "tools/outbox.h"
#include "tools/rerun.h"

/** A command's arguments: the options as given, then what its args step made of them. */
struct cmd_args {
        const char *path;
        const char *topic, *partitions, *to_offset, *to_time, *from_offset, *from_time, *since;
        const char *batch, *rate; /* purge --batch, plan --rate */
        const char *wait;         /* verify --wait SECONDS */
        const char *env_file;     /* check --env-file FILE: set before the config is read */
        int to_beginning, reproduce, dry_run, expect_caught_up, print, offline;
        const char *role;       /* grant --role */
        const char *tables[64]; /* grant --table, repeated */
        size_t table_cnt;
        int apply;               /* grant --apply */
        int all, unsent;         /* outbox --all, --unsent */
        const char *limit;       /* outbox list --limit, dupes --limit */
        int markdown;            /* help-config: 1 --markdown, 2 --man */
        const char *reason, *by; /* rerun --reason, --by */
        int emit_only;           /* rerun --emit-only */
        int nwords;              /* what follows the options: inspect's KEY, outbox's ACTION [ID...] */
        char *const *words;

        /* Made by the args steps, before the config is read. */
        struct replay_opts replay;
        int32_t *parts; /* replay --partitions */
        struct outbox_opts outbox;
        struct rerun_opts rerun;
        struct dupes_opts dupes;
        int batch_rows;    /* purge --batch (0: purge.batch) */
        double rate_per_s; /* plan --rate */
};

/* Each command against a loaded config: its exit code. */
int cmd_check(struct config *cfg, const struct cmd_args *a);
int cmd_migrate(struct config *cfg, const struct cmd_args *a);
int cmd_grant(struct config *cfg, const struct cmd_args *a);
int cmd_inspect(struct config *cfg, const struct cmd_args *a);
int cmd_stats(struct config *cfg, const struct cmd_args *a);
int cmd_purge(struct config *cfg, const struct cmd_args *a);
int cmd_outbox(struct config *cfg, const struct cmd_args *a);
int cmd_plan(struct config *cfg, const struct cmd_args *a);
int cmd_replay(struct config *cfg, const struct cmd_args *a);
int cmd_verify(struct config *cfg, const struct cmd_args *a);
int cmd_rerun(struct config *cfg, const struct cmd_args *a);
int cmd_dupes(struct config *cfg, const struct cmd_args *a);

/* The args steps: the option combinations checked and parsed before the
 * config is read; 0, or -1 after saying why (bad usage: exit 2). */
int cmd_grant_args(struct cmd_args *a);
int cmd_purge_args(struct cmd_args *a);
int cmd_outbox_args(struct cmd_args *a);
int cmd_plan_args(struct cmd_args *a);
int cmd_replay_args(struct cmd_args *a);
int cmd_rerun_args(struct cmd_args *a);
int cmd_dupes_args(struct cmd_args *a);

void cmd_args_free(struct cmd_args *a);

#endif
