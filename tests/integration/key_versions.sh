#!/usr/bin/env bash
# Key-template versions (issue 21 §4): changing how keys are built lets
# duplicates through — a copy of an order first keyed by {json:id} gets a new
# key from {json:order_no} and is applied again (shown below without
# key.previous). With key.version 2 and key.previous, until the window ends
# the claim also looks for the key the previous template builds: the copy is
# absorbed with its first outcome and not claimed again; a new order is
# keyed the new way. dedupctl check refuses a previous without until or
# without a version above 1, and the lint warns where two versions build
# keys of the same shape (one message's old key can be another's new key).
. "$(dirname "$0")/lib.sh"

T="keyver_$$"
topic "$T" 1
export SEED_ACCOUNTS=2 INITIAL_BALANCE=100
write_config "$WORK/v1.yaml" "$T"
sed -i 's/^      subject: .*/      subject: "{json:id}"/' "$WORK/v1.yaml"
UNTIL=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
# v2 FILE [PREVIOUS_SUBJECT]: the new template, with key.previous when given
v2() {
        sed 's/^      subject: .*/      subject: "ord-{json:order_no}"/' "$WORK/v1.yaml" >"$1"
        [[ -z ${2:-} ]] ||
                sed -i "s/^      action: PAY$/      action: PAY\n      version: 2\n      previous: {subject: \"$2\", action: PAY, until: \"$UNTIL\"}/" "$1"
}
v2 "$WORK/v2.yaml" "{json:id}"
v2 "$WORK/v2-bare.yaml"
grep -q "previous: {subject: \"{json:id}\"" "$WORK/v2.yaml" || fail "no key.previous in the config"
pay() { printf 'u1\t{"id":"%s","order_no":"%s","user_id":1,"amount":10}\n' "$1" "$2" | "$KT" produce -t "$T"; }
balance() { sql "SELECT balance FROM account WHERE user_id = 1"; }
keys() { sql "SELECT string_agg(idem_key || '=' || status, ',' ORDER BY idem_key) FROM dedupd.keys"; }

pay A1 N1
pay A2 N2
start d1 "$WORK/v1.yaml"
wait_done "$T"
stop d1
assert_eq "$(keys)/$(balance)" "A1/PAY=DONE,A2/PAY=DONE/80" "version 1: keys and balance"

# Version 2 with key.previous: A1's copy is absorbed, A3 is new.
pay A1 N1
pay A3 N3
start d2 "$WORK/v2.yaml"
wait_done "$T"
stop d2
assert_eq "$(keys)/$(balance)" "A1/PAY=DONE,A2/PAY=DONE,ord-N3/PAY=DONE/70" "version 2: A1's copy absorbed, not claimed as ord-N1"
grep -q "key ord-N1/PAY (version 2) was seen before as A1/PAY (version 1): absorbed, first outcome DONE" "$WORK/d2.log" ||
        fail "the absorption by the previous version's key is not logged"
assert_eq "$(sql "SELECT count(*) FROM transfer_ledger")" 3 "ledger rows (A1, A2, A3)"
assert_eq "$(sql "SELECT sum(applied) || '/' || sum(duplicates) FROM dedupd.offsets WHERE topic = '$T'")" "3/1" "applied/duplicates"

# What it prevents: version 2 without key.previous applies A2's copy again.
pay A2 N2
start d3 "$WORK/v2-bare.yaml"
wait_done "$T"
stop d3
assert_eq "$(balance)" 60 "without key.previous, A2's copy is debited a second time (the hazard)"

# What check says.
chk() { RC=0; "$DEDUPCTL" check --offline -c "$1" >"$WORK/check.out" 2>&1 || RC=$?; }
sed 's/, until: "[^"]*"}/}/' "$WORK/v2.yaml" >"$WORK/no-until.yaml"
chk "$WORK/no-until.yaml"
assert_eq "$RC" 1 "check: key.previous without until"
grep -q "key.previous needs subject and until" "$WORK/check.out" || fail "check: $(cat "$WORK/check.out")"
sed 's/^      version: 2$/      version: 1/' "$WORK/v2.yaml" >"$WORK/v1-prev.yaml"
chk "$WORK/v1-prev.yaml"
assert_eq "$RC" 1 "check: key.previous with version 1"
grep -q "raise key.version to 2" "$WORK/check.out" || fail "check: $(cat "$WORK/check.out")"
sed 's/^      subject: "ord-{json:order_no}"/      subject: "{json:order_no}"/' "$WORK/v2.yaml" >"$WORK/collide.yaml"
chk "$WORK/collide.yaml"
assert_eq "$RC" 0 "check of versions that may collide (a warning)"
grep -q "warning: topic '$T': key versions 1 ('{json:id}') and 2 ('{json:order_no}') build keys of the same shape" "$WORK/check.out" ||
        fail "check: $(cat "$WORK/check.out")"
chk "$WORK/v2.yaml"
assert_eq "$RC" 0 "check of version 2 with a prefix"
grep -q "same shape" "$WORK/check.out" && fail "a prefixed version 2 is warned of: $(cat "$WORK/check.out")"
log "ok: key.previous absorbed a copy keyed the old way; check refuses what makes no sense and warns where versions collide"
