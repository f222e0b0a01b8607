# Helpers for the tests that mix unkeyable messages into a workload and stop a
# broker while dedupd dead-letters them; sourced after lib.sh.

# with_poison IN OUT POISON EVERY: IN's lines into OUT with a poison message
# after every EVERY-th, each poison unique (p-1, p-2, ...): odd ones not JSON,
# even ones JSON without order_id. Their bodies, one a line, into POISON.
with_poison() {
        awk -v every="$4" -v poison="$3" '{
                print
                if (NR % every == 0) {
                        n++
                        p = (n % 2) ? "not json p-" n : "{\"poison\":\"p-" n "\",\"user_id\":1,\"amount\":10}"
                        print p
                        print p >poison
                }
        }' "$1" >"$2"
}

# wait_self_stopped NAME WHAT: until dedupd NAME has stopped itself (a fault point's SIGSTOP), 30 s at most
wait_self_stopped() {
        for ((i = 0; i < 600; i++)); do
                [[ $(ps -o stat= -p "${PIDS[$1]}" 2>/dev/null) == T* ]] && return 0
                kill -0 "${PIDS[$1]}" 2>/dev/null || fail "dedupd $1 exited before it stopped itself $2"
                sleep 0.05
        done
        fail "dedupd $1 did not stop itself $2"
}

# alive NAME WHEN: dedupd NAME is still running (its log's last lines otherwise)
alive() {
        kill -0 "${PIDS[$1]}" 2>/dev/null || fail "dedupd $1 died $2: $(grep -m1 -A3 'ERROR: AddressSanitizer' "$WORK/$1.log" || tail -n 5 "$WORK/$1.log")"
}

# dead_letters_cover POISON LETTERS: every body of POISON is among LETTERS'
# (one body a line) at least once, and LETTERS holds nothing else
dead_letters_cover() {
        local missing extra
        missing=$(sort -u "$2" | comm -23 <(sort -u "$1") -)
        extra=$(sort -u "$2" | comm -13 <(sort -u "$1") -)
        [[ -z $missing ]] || fail "poison messages never dead-lettered: $(echo "$missing" | head -n 5 | tr '\n' '|')"
        [[ -z $extra ]] || fail "dead letters that are no poison message: $(echo "$extra" | head -n 5 | tr '\n' '|')"
        log "ok: each of $(wc -l <"$1") poison messages dead-lettered ($(wc -l <"$2") dead letters, $(($(wc -l <"$2") - $(wc -l <"$1"))) again after the broker came back)"
}
