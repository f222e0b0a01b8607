#!/usr/bin/env bash
# NATS JetStream only (a named extra of the conformance suite, whose
# dead_letter scenario covers dead letters to nats.dead_letter.subject):
# without a dead-letter subject an unkeyable message is terminated (AckTerm)
# and stays in the stream, the reason in the log, the key here from a NATS
# header ({header:Order-Id}); and a dead letter over the server's max_payload
# is cut to fit, never retried for ever.
. "$(dirname "$0")/../../integration/lib.sh"
. "$(dirname "$0")/../../integration/nats_lib.sh"

# ---- 1: terminated (AckTerm), the key from a header
STREAM="T_$ID" SUBJ="term.$ID" DLQ_SUBJ="nowhere.$ID"
CONSUMER="${DURABLE}-${SUBJ//./_}"
nats_stream
KEY_SUBJECT="{header:Order-Id}" write_nats_config "$WORK/t.yaml"
echo '{"user_id":2,"amount":10}' | publish "Order-Id:h-1"
echo '{"user_id":2,"amount":10}' | publish "Order-Id:h-1"
echo '{"user_id":2,"amount":10}' | publish
echo '{"user_id":2,"amount":10}' | publish "Order-Id:h-2"
start d2 "$WORK/t.yaml"
nats_done
stop d2
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 2")" 980 "balance of user 2 (h-1 once, h-2 once)"
assert_eq "$(sql "SELECT count(*) FROM dedupd.keys WHERE idem_key IN ('h-1/PAY','h-2/PAY')")" 2 "keys taken from the Order-Id header"
assert_eq "$(consumer_field ack_pending)" 0 "messages left unacknowledged (the terminated one included)"
assert_eq "$(last_seq)" 4 "the terminated message is still in the stream"
grep -q "offset 3 dead-lettered to AckTerm (terminated, left in the stream): " "$WORK/d2.log" ||
        fail "the log does not say sequence 3 was terminated and why"
assert_eq "$(sql "SELECT sum(dead_lettered) FROM dedupd.offsets WHERE topic = '$SUBJ'")" 1 "terminated messages counted"

# ---- 2: a dead letter over the server's max_payload is cut to fit, never retried for ever
# A payload the stream took, just under max_payload (1 MiB), is over limits.payload_bytes: its dead letter,
# with dedupd's headers, would be over max_payload. It goes cut, its neighbours apply.
STREAM="B_$ID" SUBJ="big.$ID" DLQ_SUBJ="bigdead.$ID"
CONSUMER="${DURABLE}-${SUBJ//./_}"
nats_stream
write_nats_config "$WORK/b.yaml" "  dead_letter: {subject: $DLQ_SUBJ}"
{
        echo '{"order_id":"b-1","user_id":3,"amount":10}'
        head -c 1048400 /dev/zero | tr '\0' 'x'; echo
        echo '{"order_id":"b-2","user_id":3,"amount":10}'
} | publish "trace:t-43"
start d3 "$WORK/b.yaml"
nats_done 60
stop d3
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 3")" 980 "balance of user 3 (the orders around the large one)"
"$NT" dump "$STREAM" "$DLQ_SUBJ" >"$WORK/big.txt"
assert_eq "$(wc -l <"$WORK/big.txt")" 1 "dead letters on $DLQ_SUBJ"
grep -qP "dedupd.reason=payload too large: 1048400 bytes" "$WORK/big.txt" || fail "the dead letter's reason: $(cut -c1-300 "$WORK/big.txt")"
grep -qP "dedupd.original.size=1048400[;\\t]" "$WORK/big.txt" || fail "the dead letter does not say how large the original was"
grep -qP "dedupd.truncated=value cut to its first [0-9]+ of 1048400 bytes" "$WORK/big.txt" || fail "the dead letter does not say it was cut"
