# Shared helpers for the fault-injection cases (tests/faults/cases/*.sh).
# Sourced by every case: it sources the integration tests' lib.sh (database per
# test, topics, start/stop/crash, check_invariants, workload) and adds rounds
# (one database per sub-run), exit-status waits, fault-time checks and the
# result lines the runner (tests/faults/run) turns into its table.
#
# Environment set by the runner (all optional when a case is run by hand):
#   FAULTS_RESULT  file the case appends one line per round to
#   FAULTS_ITER    iteration number (1..N with --soak N): varies fault positions
#   FAULTS_LOGDIR  where the dedupd logs of a failed case are copied
# shellcheck source=tests/integration/lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../integration" && pwd)/lib.sh"

FAULTS_RESULT=${FAULTS_RESULT:-/dev/null}
FAULTS_ITER=${FAULTS_ITER:-1}
BASE_ID=$ID
FL_DBS=("$DB")
FL_HOOKS=()
ROUND=main
ROUND_N=0
ROUNDS_FAILED=0

# ------------------------------------------------------------------ cleanup --
# fl_on_exit CMD: run CMD (a restore step) when the case exits, however it exits
fl_on_exit() { FL_HOOKS+=("$1"); }

fl_cleanup() {
        local rc=$? h name pid db
        trap - EXIT
        if ((rc == 0 && ROUNDS_FAILED > 0)); then
                echo "FAIL: $ROUNDS_FAILED round(s) of $TEST failed" >&2
                rc=1 FAILED=1
        fi
        for h in "${FL_HOOKS[@]}"; do
                eval "$h" || true
        done
        # A stopped process (the zombie case) dies of SIGKILL as well.
        for name in "${!PIDS[@]}"; do
                pid=${PIDS[$name]}
                kill -9 "$pid" 2>/dev/null || true
                kill -CONT "$pid" 2>/dev/null || true
        done
        # The services must be up again for the next case, whatever happened here.
        if ! "$DEDUPD_SERVICES" status >/dev/null 2>&1; then
                "$DEDUPD_SERVICES" pg-start >/dev/null 2>&1 || true
                "$DEDUPD_SERVICES" kafka-start >/dev/null 2>&1 || true
        fi
        if [[ ($rc -ne 0 || $FAILED -ne 0 || -n ${FAULTS_KEEP_LOGS:-}) && -n ${FAULTS_LOGDIR:-} ]]; then
                mkdir -p "$FAULTS_LOGDIR"
                cp "$WORK"/*.log "$FAULTS_LOGDIR"/ 2>/dev/null || true
        fi
        for db in "${FL_DBS[@]}"; do
                [[ $db == "$DB" ]] && continue # lib.sh's cleanup drops the current one
                psql "$PG_DSN" -X -q -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
        done
        set +e # lib.sh runs under set -e: "(exit 1)" would end the shell right here
        (exit "$rc")
        cleanup # lib.sh's: logs of a failure, the current database, $WORK; exits with rc
}
trap fl_cleanup EXIT
trap 'exit 143' TERM INT

# ------------------------------------------------------------------- rounds --
# round NAME: a fresh sub-run — its own database, namespace and consumer group
# (write_config picks them up from ID and TEST_DSN).
round() {
        ROUND=$1
        ROUND_N=$((ROUND_N + 1))
        ID="${BASE_ID}_$ROUND_N"
        DB="it_$ID"
        TEST_DSN="${PG_DSN/dbname=dedupd/dbname=$DB}"
        FL_DBS+=("$DB")
        psql "$PG_DSN" -X -q -c "CREATE DATABASE \"$DB\"" >/dev/null
        log "== round $ROUND (database $DB, group grp-$ID)"
}

# fl_start NAME CONFIG [FAULT]: start dedupd, DEDUPD_FAULT=FAULT when given
fl_start() {
        if [[ -n ${3:-} ]]; then
                DEDUPD_FAULT=$3 start "$1" "$2"
        else
                : >>"$WORK/$1.log" # (there at once, as lib.sh's start makes it)
                env -u DEDUPD_FAULT "$DEDUPD" -c "$2" >>"$WORK/$1.log" 2>&1 &
                PIDS[$1]=$!
        fi
}

# wait_exit NAME SECONDS: wait for the process to end on its own; EXIT_RC is its status.
# One question per turn — is the pid still there? — answered by kill -0 alone:
# the shell reaps its children itself, so a child that ended is gone (or, for
# a moment, a zombie that the next turn sees gone). Its status then comes from
# the shell's own wait, which keeps the status of a child it already reaped.
# (Asking kill -0 and /proc in two reads let a child reaped between them pass
# for alive: a case failed with "not reached" although the point was hit.)
wait_exit() {
        local pid=${PIDS[$1]} i rc=0
        for ((i = 0; i <= $2 * 10; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && return 1
        wait "$pid" || rc=$?
        EXIT_RC=$rc # read by the cases
        export EXIT_RC
        unset "PIDS[$1]"
}

# proc_state NAME: the process state letter (R, S, T for stopped, ...)
proc_state() { awk '{print $3}' "/proc/${PIDS[$1]}/stat" 2>/dev/null || echo gone; }

# wait_progress TOPIC N [SECONDS]: until the database progressed over N records
wait_progress() {
        local i
        for ((i = 0; i < ${3:-60} * 20; i++)); do
                (($(progressed "$1") >= $2)) && return 0
                sleep 0.05
        done
        return 1
}

# kt_offsets TOPIC: kafkatool offsets of the group, retried while the broker's
# group coordinator is not ready (right after a broker restart)
kt_offsets() {
        local i out
        for ((i = 0; i < 60; i++)); do
                out=$("$KT" offsets -t "$1" -g "grp-$ID" 2>/dev/null) && { echo "$out"; return 0; }
                sleep 0.5
        done
        fail "kafkatool offsets -t $1 -g grp-$ID kept failing for 30 s"
}

# kafka_ahead TOPIC: partitions whose Kafka committed offset is ahead of the
# database's next offset (offsets are committed only after COMMIT: must be 0)
kafka_ahead() {
        local t=$1 p c db n=0 out
        out=$(kt_offsets "$t") || exit 1 # (called in $(...): the caller's assignment fails)
        while read -r p _ _ c; do
                [[ $p == total ]] && continue
                ((c >= 0)) || continue
                db=$(sql "SELECT coalesce(max(next_offset), 0) FROM dedupd.offsets WHERE topic = '$t' AND partition = $p")
                if ((c > db)); then
                        log "ANOMALY: partition $p: Kafka committed $c, database only $db" >&2
                        n=$((n + 1))
                fi
        done <<<"$out"
        echo "$n"
}

# kafka_committed TOPIC: sum of the group's committed offsets (unset counts 0)
kafka_committed() {
        local out
        out=$(kt_offsets "$1") || exit 1
        awk '$1!="total" && $4>0 {s+=$4} END {print s+0}' <<<"$out"
}

# ------------------------------------------------------------------- result --
# finish_round TOPIC KEYSFILE [EXTRA_ANOMALIES [NOTE]]: after every dedupd of the
# round stopped cleanly: database progress == topic size, Kafka lag 0, lib.sh's
# check_invariants, and dedupctl verify --expect-caught-up. Counts every anomaly (not
# just the first) and appends the round's line to FAULTS_RESULT. A round with
# anomalies fails the case at its end; the case's other rounds still run.
finish_round() {
        local t=$1 keys=$2 extra=${3:-0} note=${4:-} anomalies=0 msgs prog lag eff rej inv=ok
        local missing doubled done_noeff failed_eff pending foreign balance vrc=n/a
        msgs=$(produced "$t")
        prog=$(progressed "$t")
        lag=$(kafka_lag "$t")
        ((prog == msgs)) || { log "ANOMALY: database progressed $prog of $msgs records"; anomalies=$((anomalies + 1)); }
        ((lag == 0)) || { log "ANOMALY: Kafka lag $lag after a clean stop"; anomalies=$((anomalies + 1)); }
        # lib.sh's checks, in a subshell so that its first failed assertion
        # does not hide the rest; every class is then counted below.
        (check_invariants "$keys") || inv=FAILED
        missing=$(sql "SELECT count(*) FROM expected e LEFT JOIN dedupd.keys k USING (idem_key) WHERE k.idem_key IS NULL")
        doubled=$(sql "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) n FROM transfer_ledger GROUP BY idem_key HAVING count(*) > 1) d")
        done_noeff=$(sql "SELECT count(*) FROM dedupd.keys k WHERE status = 'DONE' AND NOT EXISTS (SELECT 1 FROM transfer_ledger l WHERE l.idem_key = k.idem_key)")
        failed_eff=$(sql "SELECT count(*) FROM dedupd.keys k WHERE status = 'FAILED' AND EXISTS (SELECT 1 FROM transfer_ledger l WHERE l.idem_key = k.idem_key)")
        pending=$(sql "SELECT count(*) FROM dedupd.keys WHERE status NOT IN ('DONE','FAILED')")
        foreign=$(sql "SELECT count(*) FROM transfer_ledger l WHERE NOT EXISTS (SELECT 1 FROM expected e WHERE e.idem_key = l.idem_key)")
        balance=$(sql "SELECT CASE WHEN sum(a.balance) + (SELECT coalesce(sum(amount),0) FROM transfer_ledger) = count(*) * ${INITIAL_BALANCE:-1000} THEN 0 ELSE 1 END FROM account a")
        anomalies=$((anomalies + missing + doubled + done_noeff + failed_eff + pending + foreign + balance + extra))
        if [[ $inv != ok ]] && ((missing + doubled + done_noeff + failed_eff + pending + foreign + balance == 0)); then
                anomalies=$((anomalies + 1)) # check_invariants failed on something not counted here
        fi
        if ((missing + doubled + done_noeff + failed_eff + pending + foreign + balance)); then
                log "ANOMALY: missing $missing, extra effects $doubled, DONE without effect $done_noeff," \
                        "FAILED with effect $failed_eff, pending $pending, effects of unknown keys $foreign," \
                        "balance mismatch $balance"
        fi
        vrc=0
        "$DEDUPCTL" verify -c "$WORK/$ROUND.yaml" --expect-caught-up >"$WORK/$ROUND.verify.out" 2>&1 || vrc=$?
        if ((vrc != 0)); then
                sed "s/^/[$TEST] verify: /" "$WORK/$ROUND.verify.out"
                log "ANOMALY: dedupctl verify --expect-caught-up exited $vrc"
                anomalies=$((anomalies + 1))
        else
                log "ok: dedupctl verify --expect-caught-up exited 0: $(grep -v '^\s*$' "$WORK/$ROUND.verify.out" | tail -n 1)"
        fi
        eff=$(sql "SELECT count(*) FROM transfer_ledger")
        rej=$(sql "SELECT count(*) FROM dedupd.keys WHERE status = 'FAILED'")
        local result=ok
        ((anomalies == 0)) || result=FAIL
        printf 'round\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$ROUND" "$msgs" "$eff" "$rej" "$anomalies" "$result" \
                "verify=$vrc${note:+ $note}" >>"$FAULTS_RESULT"
        log "round $ROUND: $msgs messages, $eff effects, $rej rejections, $anomalies anomalies (verify: $vrc)"
        if ((anomalies)); then
                echo "FAIL: round $ROUND: $anomalies anomalies" >&2
                ROUNDS_FAILED=$((ROUNDS_FAILED + 1))
        fi
}

# round_failed WHY [MESSAGES]: a round that failed before finish_round still leaves its line
round_failed() {
        printf 'round\t%s\t%s\t0\t0\t0\tFAIL\t%s\n' "$ROUND" "${2:-0}" "$1" >>"$FAULTS_RESULT"
        fail "round $ROUND: $1"
}

# spread IN OUT: give every line its own Kafka message key ("m<line>"), so the
# records spread evenly over the partitions (librdkafka's sticky partitioner
# puts keyless ones mostly in one) and duplicates of an order land on different
# partitions — claimed concurrently by different members of the group.
spread() { awk '{printf "m%d\t%s\n", NR, $0}' "$1" >"$2"; }

# fault_config TOPIC [EXTRA]: lib.sh's write_config into $WORK/$ROUND.yaml, which
# is CFG (and the file finish_round hands to dedupctl verify)
fault_config() {
        CFG="$WORK/$ROUND.yaml"
        write_config "$CFG" "$1" "${2:-}"
}
