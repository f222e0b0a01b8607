#!/usr/bin/env bash
# Replies: a message naming where to answer (header reply-to) gets its
# outcome there, published through the outbox and acknowledged by the broker;
# a retry (a duplicate, with its own correlation-id) gets the first outcome
# again, byte for byte, marked as the answer to a duplicate. Each reply goes
# out with an identity a downstream derives itself (dedupd.outbox.id, and the
# broker's own message id where it has one).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../../integration/outbox_lib.sh"

b_setup pay_reply 1
R=$(b_out replies)
b_config "$WORK/c.yaml"
echo '{"order_id":"R1","user_id":9,"amount":10}' | b_produce "reply-to:$R" correlation-id:c1
echo '{"order_id":"R2","user_id":9,"amount":5000}' | b_produce "reply-to:$R" correlation-id:c2
start d1 "$WORK/c.yaml"
b_wait_done
# The caller timed out and retried both: the same requests, new correlation ids.
echo '{"order_id":"R1","user_id":9,"amount":10}' | b_produce "reply-to:$R" correlation-id:c3
echo '{"order_id":"R2","user_id":9,"amount":5000}' | b_produce "reply-to:$R" correlation-id:c4
b_wait_done
poll 30 replies_are 4 || fail "$GOT replies of 4 at $R"
stop d1
b_check_acked

b_out_read "$R" "$WORK/replies.txt"
cat "$WORK/replies.txt"
# reply_of CORRELATION FIELD: a header of the reply to CORRELATION ("body": its body)
reply_of() {
        awk -F'\t' -v c="$1" -v f="$2" '{ n = split($1, h, ";"); hit = 0; v = "-"
                for (i = 1; i <= n; i++) { if (h[i] == "correlation-id=" c) hit = 1; if (index(h[i], f "=") == 1) v = substr(h[i], length(f) + 2) }
                if (hit) print (f == "body" ? $2 : v) }' "$WORK/replies.txt"
}
assert_eq "$(reply_of c1 body)/$(reply_of c3 body)" "OK: debited 10/OK: debited 10" "R1's first response, to the first ask and to the retry"
assert_eq "$(reply_of c2 body)/$(reply_of c4 body)" "insufficient balance/insufficient balance" "R2's first rejection, to the first ask and to the retry"
assert_eq "$(reply_of c3 dedupd.duplicate)/$(reply_of c4 dedupd.duplicate)" "true/true" "the retries' replies marked as answers to duplicates"
[[ $(reply_of c1 dedupd.duplicate) != true && $(reply_of c2 dedupd.duplicate) != true ]] || fail "a first reply is marked as a duplicate's"
assert_eq "$(sql "SELECT balance FROM account WHERE user_id = 9")" 990 "balance"
assert_eq "$(reply_of c1 dedupd.outbox.id)" "$(derived_id "it-$ID" R1/PAY reply)" "c1's reply id, as a downstream derives it"
assert_eq "$(reply_of c2 dedupd.outbox.id)" "$(derived_id "it-$ID" R2/PAY reply)" "c2's reply id, as a downstream derives it"
assert_eq "$(reply_of c3 dedupd.outbox.id)" "$(derived_id "it-$ID" R1/PAY reply $(b_place 3))" "the id of the reply to c3, a duplicate: derived from its place"
assert_eq "$(for c in c1 c2 c3 c4; do reply_of $c dedupd.outbox.id; done | grep -cE '^[0-9a-f]{64}$')" 4 "replies with an id"
assert_eq "$(for c in c1 c2 c3 c4; do reply_of $c dedupd.outbox.id; done | sort -u | wc -l)" 4 "distinct reply ids (a duplicate's reply is its own message)"
for c in c1 c2 c3 c4; do
        id=$(reply_of $c broker.id)
        [[ $id == - || $id == "$(reply_of $c dedupd.outbox.id)" ]] || fail "the reply to $c has the broker id $id, not its dedupd.outbox.id"
done
log "ok: the broker's own message id, where it has one, is the reply's dedupd.outbox.id"
