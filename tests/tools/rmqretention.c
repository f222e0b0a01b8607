/* rmqretention: the RabbitMQ retention lint as dedupd runs it, with the management URL that is not a setting yet — the queues' TTLs read, each class compared. */
#include <stdio.h>

#include "base/config.h"
#include "base/log.h"
#include "source/rabbitmq/queues.h"

/*
 * rmqretention CONFIG MANAGEMENT_URL
 * Exit 0: every class keeps keys long enough, or was said (WARN, stderr) not
 * to be checked; 1: a class is shorter than its queue keeps messages (the
 * message on stderr); 2: the config does not load.
 */
int main(int argc, char **argv)
{
        struct config_errors errs = {0};
        char err[1024];
        if (argc != 3) {
                fprintf(stderr, "usage: rmqretention CONFIG MANAGEMENT_URL\n");
                return 2;
        }
        log_set_level(LOG_DEBUG);
        struct config *cfg = config_load(argv[1], &errs);
        if (!cfg) {
                for (size_t i = 0; i < errs.cnt; i++)
                        fprintf(stderr, "%s\n", errs.msgs[i]);
                config_errors_clear(&errs);
                return 2;
        }
        enum rmq_check_rc rc = rmq_queues_retention(cfg, argv[2], err, sizeof(err));
        if (rc != RMQ_CHECK_OK)
                fprintf(stderr, "%s\n", err);
        config_free(cfg);
        config_errors_clear(&errs);
        return rc == RMQ_CHECK_OK ? 0 : 1;
}
