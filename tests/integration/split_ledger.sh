#!/usr/bin/env bash
# The crash-loop ledger after a batch that failed and was split, on RabbitMQ
# and on Kafka. An instance's first batch is counted in dedupd.attempts (one
# row, its range [0, 20)). Here it fails with an SQL error no message is
# named for, so it is halved until the message that causes it runs alone, and
# commits in parts: 0..9, then 10..13, ... The row must stay as long as part
# of its range is uncommitted (a crash then is a crash of that start), and go
# once the commits reach its end, or at a clean stop before they do: a clean
# stop leaves no row, or the next instance takes it for a crash and runs the
# range one message at a time (CI: rabbitmq_competing, round 2, a deadlock
# against a peer split the first batch and its row outlived every instance;
# a deadlock no longer splits a batch, handler_contention.sh, but any SQL
# error no message is named for does).
#   1. an SQL error (SQLSTATE P0001, raised by a trigger on the handler's
#      table, in the batch and in its pessimistic retry) splits the batch; it
#      commits to its end; stopped cleanly: no row left.
#   2. the error on every run of one message: the split narrows down to it
#      and retries it alone; the row is still there (the start has not
#      committed its range); stopped cleanly meanwhile: no row left.
#   3. the same, killed midway: the row stays, the next instance takes it
#      for a crash (the rest of the range one message at a time), and the
#      row goes once that range has committed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/rmq_lib.sh"

N=20
BAD=14 # the message that fails (delivery number / offset 14 of 0..19)

# fail_key KEY TIMES: the transfer handler's ledger insert fails with an SQL
# error (SQLSTATE P0001) in every batch that holds KEY, its first TIMES
# runs (counted by a sequence: the count outlives the rollback). The insert
# is one statement for the whole batch: no message is named, dedupd splits.
FAILS=0
fail_key() {
        FAILS=$((FAILS + 1))
        sql "CREATE SEQUENCE fail_$FAILS; INSERT INTO fail_keys VALUES ('$1', $2, 'fail_$FAILS')"
}
install_failures() {
        sql 'CREATE TABLE fail_keys (idem_key text PRIMARY KEY, times bigint NOT NULL, seq text NOT NULL);
             CREATE FUNCTION fail_keys() RETURNS trigger LANGUAGE plpgsql AS $$
             DECLARE t bigint; s text;
             BEGIN
               SELECT times, seq INTO t, s FROM fail_keys WHERE idem_key = NEW.idem_key;
               IF FOUND AND nextval(s::regclass) <= t THEN
                 RAISE EXCEPTION $q$ledger insert refused (raised by the test for %)$q$, NEW.idem_key USING ERRCODE = $q$P0001$q$;
               END IF;
               RETURN NEW;
             END$$;
             CREATE TRIGGER fail_keys BEFORE INSERT ON transfer_ledger FOR EACH ROW EXECUTE FUNCTION fail_keys()'
}

# ledger: the rows of dedupd.attempts (offset..until xattempts, alone or in a batch)
ledger() {
        sql 'SELECT coalesce(string_agg("offset" || $$..$$ || until_offset || $$ x$$ || attempts || CASE WHEN single THEN $$ alone$$ ELSE $$ batch$$ END, $$, $$ ORDER BY "offset", single), $$-$$) FROM dedupd.attempts'
}

# source_yaml BROKER NAME: the config's source section for a queue (rabbitmq) or a topic (kafka)
source_yaml() {
        if [[ $1 == rabbitmq ]]; then
                PREFETCH=100 rmq_config_head
        else
                cat <<YAML
$(config_head)
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$ID-$2"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
YAML
        fi
}

# setup BROKER NAME PREFIX RETRY: config $WORK/NAME.yaml for the transfer
# handler on NAME, and N payments PREFIX0..PREFIX19 waiting there, so the
# first batch holds them all
setup() {
        local broker=$1 name=$2 prefix=$3
        cat >"$WORK/$name.yaml" <<YAML
$(source_yaml "$broker" "$name")
topics:
  - name: $name
    key: {subject: "{json:order_id}", action: PAY}
    handler:
      path: "$BUILD/transfer.so"
      config: {seed_accounts: "10", initial_balance: "1000"}
    batch: {max_messages: 100, max_wait_ms: 1000}
    retry: {$4}
YAML
        [[ -f $WORK/migrated ]] || {
                "$DEDUPCTL" migrate -c "$WORK/$name.yaml" >"$WORK/migrate.out" 2>&1 || fail "dedupctl migrate: $(cat "$WORK/migrate.out")"
                install_failures
                : >"$WORK/migrated"
        }
        for ((i = 0; i < N; i++)); do printf '{"order_id":"%s%d","user_id":%d,"amount":10}\n' "$prefix" "$i" $((i % 10 + 1)); done >"$WORK/$name.txt"
        if [[ $broker == rabbitmq ]]; then
                rmq_queue "$name"
                rmq_publish "$name" <"$WORK/$name.txt"
        else
                topic "$name" 1
                "$KT" produce -t "$name" <"$WORK/$name.txt" >/dev/null
        fi
}

# committed NAME: how far the database has committed NAME (deliveries or offsets)
committed() { sql "SELECT coalesce(max(next_offset), 0) FROM dedupd.offsets WHERE topic = '$1'"; }
is_committed() { [[ $(committed "$1") == "$2" ]]; }
# logged NAME PATTERN: instance NAME's log has a line matching PATTERN (grep -E)
logged() { grep -qE "$2" "$WORK/$1.log"; }

# The batch that failed is the instance's first, counted, whole: the case in point.
expect_split() {
        logged "$1" "batch of $N from partition 0 offset 0 failed, and no message of it was named" ||
                fail "$1: the first batch (all $N messages, counted in the ledger) did not fail and split: the test did not test it"
}

# 1. an SQL error once: the split batch commits to its end
case_error_once() {
        local broker=$1 name="split_dl_$1_$$" p="dl$1-"
        setup "$broker" "$name" "$p" "max_attempts: 3, backoff_ms: 20, backoff_max_ms: 100"
        fail_key "$p$BAD/PAY" 2 # the batch, then its pessimistic retry
        start "$name" "$WORK/$name.yaml"
        poll 60 is_committed "$name" "$N" || fail "$broker: committed $(committed "$name") of $N"
        stop "$name"
        expect_split "$name"
        logged "$name" "the batch that failed has committed" || fail "$broker: the split did not finish"
        assert_eq "$(sql "SELECT count(DISTINCT idem_key) || '/' || count(*) FROM transfer_ledger WHERE idem_key LIKE '$p%'")" "$N/$N" \
                "$broker, error once: effects (distinct/all)"
        assert_eq "$(ledger)" "-" "$broker, error once: ledger rows left after a clean stop"
}

# 2. the error every time: stopped cleanly while the split retries the message alone
case_stop_midway() {
        local broker=$1 name="split_stop_$1_$$" p="st$1-"
        setup "$broker" "$name" "$p" "max_attempts: 1000, backoff_ms: 200, backoff_max_ms: 200"
        fail_key "$p$BAD/PAY" 1000000
        start "$name" "$WORK/$name.yaml"
        poll 60 logged "$name" "offset $BAD: .*\(attempt 2 of 1000\)" || fail "$broker: message $BAD was not retried alone"
        expect_split "$name"
        assert_eq "$(committed "$name")" "$BAD" "$broker, error every time: committed (everything before the message that fails)"
        # The start is still counted: its range is not all committed.
        assert_eq "$(ledger)" "0..$N x1 batch" "$broker, error every time: ledger while the split works through the range"
        stop "$name"
        assert_eq "$(ledger)" "-" "$broker, error every time: ledger rows left after a clean stop midway"
        if logged "$name" "one message at a time|crash loop"; then fail "$broker: a clean run taken for a crash"; fi
}

# 3. the same, but killed midway: the start is a crash; the next instance
#    runs the rest of its range one message at a time, and forgets the row
#    once it has committed the range
case_crash_midway() {
        local broker=$1 name="split_crash_$1_$$" p="cr$1-"
        setup "$broker" "$name" "$p" "max_attempts: 1000, backoff_ms: 200, backoff_max_ms: 200"
        fail_key "$p$BAD/PAY" 1000000
        start "$name" "$WORK/$name.yaml"
        poll 60 logged "$name" "offset $BAD: .*\(attempt 2 of 1000\)" || fail "$broker: message $BAD was not retried alone"
        expect_split "$name"
        crash "$name"
        assert_eq "$(ledger)" "0..$N x1 batch" "$broker, killed midway: ledger (the start crashed)"
        sql "UPDATE fail_keys SET times = 0 WHERE idem_key = '$p$BAD/PAY'"
        mv "$WORK/$name.log" "$WORK/$name.1.log"
        start "$name" "$WORK/$name.yaml"
        poll 60 is_committed "$name" "$N" || fail "$broker: committed $(committed "$name") of $N after the restart"
        stop "$name"
        logged "$name" "offsets up to $((N - 1)) were in a batch that crashed or stalled dedupd 1 time .*: running them one message at a time" ||
                fail "$broker: the restart did not take the killed start for a crash"
        assert_eq "$(sql "SELECT count(DISTINCT idem_key) || '/' || count(*) FROM transfer_ledger WHERE idem_key LIKE '$p%'")" "$N/$N" \
                "$broker, killed midway: effects (distinct/all)"
        assert_eq "$(ledger)" "-" "$broker, killed midway: ledger rows left once the range has committed"
}

for broker in rabbitmq kafka; do
        case_error_once "$broker"
        case_stop_midway "$broker"
        case_crash_midway "$broker"
done
