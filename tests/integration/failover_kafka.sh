#!/usr/bin/env bash
# Database failover on Kafka: a primary with an asynchronous streaming
# replica, mid-run the replica falls behind, the primary is stopped
# -m immediate and the replica promoted without the last commits. dedupd
# re-positions every partition from the promoted database, so what was lost
# is consumed again: every order exactly once, nothing missing, positions in
# dedupd.offsets and in the group at the end of the topic. Then the same with
# dedupd killed and restarted during the failover, its partitions assigned
# while no database answers (they wait, paused, for their positions).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/failover_lib.sh"

fo_topic() { FO_TOPIC="fo_${1}_$$"; topic "$FO_TOPIC" 4; }
fo_config() {
        cat >"$1" <<EOF2
$(config_head)
kafka:
  bootstrap.servers: "$KAFKA_BOOTSTRAP"
  group.id: "grp-$FO_TOPIC"
  session.timeout.ms: "6000"
  heartbeat.interval.ms: "500"
topics:
$(transfer_topic "$FO_TOPIC")
EOF2
}
fo_produce() { "$KT" produce -t "$FO_TOPIC" <"$1"; }
fo_end() { produced "$FO_TOPIC"; }
fo_wait_done() { fo_wait_progress "$(fo_end)" 90; }
fo_check_broker() {
        local p lo hi committed stored
        while read -r p lo hi committed; do
                [[ $p == total ]] && continue
                stored=$(sql "SELECT next_offset FROM dedupd.offsets WHERE topic = '$FO_TOPIC' AND partition = $p")
                assert_eq "$stored/$committed" "$hi/$hi" "partition $p: dedupd.offsets/the group's committed offset against the end"
        done < <("$KT" offsets -t "$FO_TOPIC" -g "grp-$FO_TOPIC")
}

fo_run d1
FO_ASSIGN_WHILE_DOWN=1 fo_run d2 restart
