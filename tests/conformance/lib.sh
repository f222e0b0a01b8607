# The conformance suite's shared steps: every scenario (scenarios/*.sh) is
# written once against the broker adapter and run as `scenario.sh BROKER`
# (kafka, nats or rabbitmq). This sources the integration tests' lib.sh
# (a database per test, dedupd start/stop/crash, workloads, invariants), then
# brokers/BROKER.sh, which defines the same steps for each broker:
#   b_setup NAME PARTS       the topic/subject/queue and where its dead letters go; NAME_B its name
#   b_config FILE [YAML]     a transfer-handler config on it (YAML: more of its topics[] entry)
#   b_produce [N:V]... <L    each line of stdin one message, with these headers
#   b_count                  messages produced
#   b_committed              messages the database committed past (deliveries on RabbitMQ)
#   b_acked                  messages the broker holds as acknowledged
#   b_wait_done [SECONDS]    until every message is committed and acknowledged
#   b_done                   a predicate: every message committed and acknowledged
#   b_check_acked            assert nothing is left unacknowledged, as the broker sees it
#   b_check_started LOG      assert the log says what dedupd consumes (and no secret)
#   b_dead_letters OUT       the dead letters, one a line: "name=value;...<TAB>body"
#   b_out NAME               a destination for replies and emitted messages, its name printed
#   b_out_read DEST OUT      what it holds, as b_dead_letters prints it (broker.id=: the broker's message id)
#   b_out_count DEST         how many messages it holds
#   b_place N                the place of the Nth message ("TOPIC PARTITION OFFSET", as outbox ids hash it)
#   b_origin N               the dead-letter headers (extended regex) naming the Nth message
#   b_broker_stop term|kill  stop the broker every test shares
#   b_broker_start           start it again
#   b_check_reconnected LOG  assert the log says dedupd lost the broker (and came back, where it says so)
#   b_tls_setup NAME         as b_setup, on the broker's TLS endpoint (a password too); TLS_CA the CA
#                            that signed its certificate, TLS_SECRET the password in the config
#   b_tls_config FILE CA     b_config's, over TLS, the broker's certificate checked against CA
# and B_REDELIVERS_COMMITTED (yes: a batch committed, never acked, comes back),
# B_EMPTY_REASON (the dead-letter reason of an empty message: what the broker sends it as),
# B_RESUME_LINE (a regex for the log's line when a restart resumes from a position; "": none),
# B_REPLAY_REFUSED (a regex for dedupctl replay's refusal while dedupd runs; brokers that replay),
# B_RESTART_S (seconds the broker takes to hand a killed instance's messages to a new one),
# B_BODY_EXTRA (bytes the test's publisher adds to each line's body),
# B_TLS_REFUSED (a regex for the ERROR when the broker's certificate is not signed by the configured CA).
BROKER=${1:-}
CONF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case $BROKER in
kafka | nats | rabbitmq) ;;
*) echo "usage: $0 kafka|nats|rabbitmq" >&2; exit 2 ;;
esac
# shellcheck source=tests/integration/lib.sh
. "$CONF_DIR/../integration/lib.sh"
TEST="conf_${TEST}_$BROKER" # what log() prefixes, the name ctest knows it by
TAB=$'\t'
# shellcheck disable=SC1090
. "$CONF_DIR/brokers/$BROKER.sh"

# wait_stopped NAME: until dedupd NAME stopped itself (a fault point's SIGSTOP), 30 s at most
wait_stopped() {
        for ((i = 0; i < 600; i++)); do
                [[ $(ps -o stat= -p "${PIDS[$1]}" 2>/dev/null) == T* ]] && return 0
                sleep 0.05
        done
        fail "dedupd $1 did not stop itself at its fault point"
}

# wait_exit NAME: until dedupd NAME ended (a fault point's kill); RC its exit status
wait_exit() {
        RC=0
        wait "${PIDS[$1]}" 2>/dev/null || RC=$?
        unset "PIDS[$1]"
}

# counted: deliveries committed with an outcome (applied, rejected, duplicate, dead-lettered)
counted() { sql "SELECT coalesce(sum(applied) + sum(rejected) + sum(duplicates) + sum(dead_lettered), 0) FROM dedupd.offsets WHERE topic = '$NAME_B'"; }

# dead_letter_of FILE ORIGIN_REGEX REASON: the body of the dead letter (a line
# of b_dead_letters) whose headers match ORIGIN_REGEX and whose dedupd.reason
# contains REASON (the reason may hold a ";": it ends at the next dedupd.
# header); fails when there is none
dead_letter_of() {
        grep -aE "$2" "$1" | awk -F'\t' -v r="$3" '{
                at = index($1, "dedupd.reason="); if (!at) next
                v = substr($1, at + 14); end = index(v, ";dedupd."); if (end) v = substr(v, 1, end - 1)
                if (!found && index(v, r)) { print $2; found = 1 }
        } END { exit !found }' # reads to the end: an early exit would end grep with SIGPIPE (pipefail)
}

# recorded_keys: the keys the database holds (0 while it cannot say)
recorded_keys() { sql "SELECT count(*) FROM dedupd.keys" 2>/dev/null || echo 0; }

# committed_past N: the database committed past more than N messages (b_committed)
committed_past() { (($(b_committed) > $1)); }

# b_head: the config b_config writes, up to its topics: (a scenario's own topics follow)
b_head() { b_config /dev/stdout | sed '/^topics:$/,$d'; }

# replies_are N / events_are N: $R / $E holds N messages (GOT: how many it holds)
replies_are() { GOT=$(b_out_count "$R"); [[ $GOT == "$1" ]]; }
events_are() { GOT=$(b_out_count "$E"); [[ $GOT == "$1" ]]; }
# outbox_sent: no outbox row waits to be published
outbox_sent() { [[ $(sql "SELECT count(*) FROM dedupd.outbox WHERE sent_at IS NULL") == 0 ]]; }
