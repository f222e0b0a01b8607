# The database failover scenario, one home for both brokers (sourced after
# lib.sh, and nats_lib.sh for NATS; failover_kafka.sh, failover_nats.sh):
# a private PostgreSQL primary with an asynchronous streaming replica
# (scripts/services pg-pair-*: the shared cluster is never stopped), dedupd's
# conninfo naming both hosts with target_session_attrs=read-write, and a
# failover mid-run that provably lost commits: the replica is cut off,
# dedupd commits more on the primary, the primary is stopped -m immediate and
# the replica promoted. The test fails when the promoted database is not
# behind.
#
# The broker's side comes from the driver: fo_topic NAME (a fresh topic or
# subject, FO_TOPIC), fo_config FILE, fo_produce FILE (append the lines),
# fo_end (the position after the last message, summed over partitions),
# fo_wait_done (until everything is consumed and acknowledged) and
# fo_check_broker (its own end-of-run assertions). FO_ASSIGN_WHILE_DOWN=1:
# the restarted dedupd's partitions are assigned while no database answers.

export SEED_ACCOUNTS=50 INITIAL_BALANCE=3000 BATCH_MAX=50
chmod o+x "$WORK" # the postgres user reaches the pairs' directories

# fo_pair NAME: a fresh primary + replica in $WORK/NAME (PAIR_* from its env);
# dedupd, sql and check_invariants use whichever of the two is read-write.
fo_pair() {
        PAIR="$WORK/$1"
        "$DEDUPD_SERVICES" pg-pair-up "$PAIR" >/dev/null
        on_exit "\"\$DEDUPD_SERVICES\" pg-pair-down '$PAIR' >/dev/null 2>&1"
        # shellcheck disable=SC1091
        . "$PAIR/env"
        TEST_DSN=$PAIR_DSN
}

# The workload in three parts: before the replica falls behind, while it is
# behind (these commits are lost), after the failover.
workload "$WORK/w.txt" "$WORK/keys.txt" 3000 2000
split -n l/3 -d "$WORK/w.txt" "$WORK/part."

# fo_wait_progress WANT [SECONDS]: until the read-write database has progressed to WANT
fo_wait_progress() { wait_progressed "$FO_TOPIC" "$1" "${2:-60}"; }

# The replica receives no more WAL from here on: once it has replayed what
# the primary holds, its primary_conninfo is pointed at a closed port and
# reloaded, so its WAL receiver disconnects and cannot come back (a WAL
# receiver stopped with SIGSTOP once let 19 of 20 later commits through).
fo_replica_falls_behind() {
        local lsn rcv
        lsn=$(psql "$PAIR_PRIMARY_DSN" -XAtc "SELECT pg_current_wal_lsn()")
        for ((i = 0; i < 100; i++)); do
                [[ $(psql "$PAIR_REPLICA_DSN" -XAtc "SELECT pg_last_wal_replay_lsn() >= '$lsn'") == t ]] && break
                sleep 0.1
        done
        psql "$PAIR_REPLICA_DSN" -XAtqc "ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=1 connect_timeout=1'" \
                -c "SELECT pg_reload_conf()" >/dev/null
        for ((i = 0; i < 100; i++)); do
                rcv=$(psql "$PAIR_REPLICA_DSN" -XAtc "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'")
                [[ $rcv == 0 ]] && break
                sleep 0.1
        done
        [[ $rcv == 0 ]] || fail "the replica's WAL receiver still streams from the primary after its primary_conninfo was cut"
        FO_REPLICA_LSN=$(psql "$PAIR_REPLICA_DSN" -XAtc "SELECT pg_last_wal_receive_lsn()")
        log "replica cut off from the primary at its $FO_REPLICA_LSN (the primary was at $lsn)"
}

# What the primary holds when it dies (no dedupd commits meanwhile).
fo_primary_measured() {
        FO_PRIMARY_AT=$(progressed "$FO_TOPIC")
        FO_PRIMARY_KEYS=$(sql "SELECT count(*) FROM dedupd.keys")
}

# The primary gone: stopped -m immediate.
fo_primary_dies() {
        [[ -n ${FO_PRIMARY_AT:-} ]] || fo_primary_measured
        "$DEDUPD_SERVICES" pg-pair-stop "$PAIR" primary immediate >/dev/null 2>&1
        log "primary stopped -m immediate at position $FO_PRIMARY_AT, $FO_PRIMARY_KEYS keys"
        FO_LOST_FROM=$FO_PRIMARY_AT FO_LOST_KEYS=$FO_PRIMARY_KEYS
        unset FO_PRIMARY_AT FO_PRIMARY_KEYS
}

# The replica promoted; it must have lost commits, or the test proves nothing.
# What it holds is read while it is still a standby: once promoted, the
# running dedupd re-delivers what was lost within milliseconds.
fo_promote() {
        local at keys
        at=$(psql "$PAIR_REPLICA_DSN" -XAtc "SELECT coalesce(sum(next_offset), 0) FROM dedupd.offsets WHERE topic = '$FO_TOPIC'")
        keys=$(psql "$PAIR_REPLICA_DSN" -XAtc "SELECT count(*) FROM dedupd.keys")
        "$DEDUPD_SERVICES" pg-pair-promote "$PAIR" >/dev/null 2>&1
        ((at < FO_LOST_FROM && keys < FO_LOST_KEYS)) ||
                fail "the promoted replica is not behind the primary (position $at of $FO_LOST_FROM, $keys of $FO_LOST_KEYS keys): no commit was lost, the test proves nothing"
        log "promoted the replica: position $at of the primary's $FO_LOST_FROM, $keys of $FO_LOST_KEYS keys (the rest lost)"
}

# The restart variant: dedupd killed during the failover and started again.
fo_restart_during_failover() {
        local seen
        crash "$FO_D"
        if [[ ${FO_ASSIGN_WHILE_DOWN:-0} == 1 ]]; then
                # Kafka hands the restarted member its partitions only after the
                # killed one's session ended (FO_SESSION_MS): the primary goes
                # in between, so the assignment finds no database. Nothing
                # slow sits between the restart and the stop: the primary is
                # measured first (the killed dedupd commits nothing more).
                fo_primary_measured
                seen=$(grep -c "cannot read start offsets from the database" "$WORK/$FO_D.log" || true)
                local loaded
                loaded=$(grep -c "loaded from" "$WORK/$FO_D.log" || true)
                start "$FO_D" "$WORK/$FO_D.yaml"
                for ((i = 0; i < 300; i++)); do
                        (($(grep -c "loaded from" "$WORK/$FO_D.log" || true) > loaded)) && break
                        sleep 0.05
                done
                fo_primary_dies
                for ((i = 0; i < 600; i++)); do
                        (($(grep -c "cannot read start offsets from the database" "$WORK/$FO_D.log" || true) > seen)) && break
                        sleep 0.1
                done
                (($(grep -c "cannot read start offsets from the database" "$WORK/$FO_D.log" || true) > seen)) ||
                        fail "the restarted dedupd was not assigned its partitions while the database was down: the scenario did not happen"
        else
                fo_primary_dies
                start "$FO_D" "$WORK/$FO_D.yaml" # it waits for a read-write database
        fi
        fo_promote
}

# What must hold at the end: every order exactly once, nothing missing, the
# database's positions at the end of the topic.
fo_check() {
        check_invariants "$WORK/keys.txt"
        assert_eq "$(sql "SELECT count(*) FROM dedupd.keys")" 2000 "distinct orders recorded on the promoted database"
        assert_eq "$(progressed "$FO_TOPIC")" "$(fo_end)" "dedupd.offsets against the end of the topic"
        fo_check_broker
}

# fo_run NAME [restart]: the scenario on a fresh pair and topic, dedupd
# instance NAME; restart: dedupd is killed during the failover and started
# again, as its supervisor would.
fo_run() {
        FO_D=$1
        log "---- scenario $1${2:+ ($2)}"
        fo_pair "pg-$1"
        fo_topic "$1"
        fo_config "$WORK/$FO_D.yaml"
        fo_produce "$WORK/part.00"
        start "$FO_D" "$WORK/$FO_D.yaml"
        fo_wait_progress "$(fo_end)"
        fo_replica_falls_behind
        fo_produce "$WORK/part.01"
        fo_wait_progress "$(fo_end)"
        if [[ ${2:-} == restart ]]; then
                fo_restart_during_failover
        else
                fo_primary_dies
                fo_promote
        fi
        fo_produce "$WORK/part.02"
        fo_wait_done
        stop "$FO_D"
        fo_check
        [[ -n ${2:-} ]] || grep -q "re-positioning" "$WORK/$FO_D.log" || fail "dedupd never said it re-positioned"
}
