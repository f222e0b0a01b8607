#!/usr/bin/env bash
# Database failover on NATS JetStream: a primary with an asynchronous
# streaming replica, mid-run the replica falls behind, the primary is stopped
# -m immediate and the replica promoted without the last commits. dedupd
# moves the durable consumer back to the promoted database's position, so
# what was lost (and acknowledged) is delivered again: every order exactly
# once, nothing missing, nothing left unacknowledged. Then the same with
# dedupd killed during the failover and restarted, as its supervisor would.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nats_lib.sh"
. "$(dirname "$0")/failover_lib.sh"

fo_topic() {
        STREAM="S_${ID}_$1" SUBJ="pay.${ID}_$1" DLQ_SUBJ="dead.${ID}_$1"
        CONSUMER="${DURABLE}-${SUBJ//./_}"
        FO_TOPIC=$SUBJ
        nats_stream
}
fo_config() { write_nats_config "$1"; }
fo_produce() { publish <"$1"; }
fo_end() { echo $(($(last_seq) + 1)); }
fo_wait_done() { nats_done 90; }
fo_check_broker() {
        assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged"
        assert_eq "$(consumer_field pending)" 0 "messages not yet delivered"
}

fo_run d1
fo_run d2 restart
