-- bench/ceiling_min.sql — the minimal ceiling of bench/run: the transfer's
-- effect with the least dedup bookkeeping that still makes it exactly-once,
-- driven inside the server like bench/ceiling.sql. Per batch of the workload
-- (bench_work, loaded and parsed by bench/run): claim every key (no
-- fingerprint), and for the keys claimed now lock and debit the accounts and
-- write the ledger, then move each partition's offset; COMMIT. What
-- ceiling.sql does beyond this — fingerprints, the first outcomes of the keys
-- seen before, the responses, the progress history — is what dedupd's
-- features cost over the bare minimum; the ratio to this procedure is what
-- issue 18's targets are stated in.
--
--   psql -v parts=4 -f bench/ceiling_min.sql;  CALL bench_ceiling_min('bench', 1000);

INSERT INTO dedupd.offsets (namespace, topic, partition, next_offset)
SELECT 'bench', 'ceiling_min', p, 0 FROM generate_series(0, :parts - 1) AS p
ON CONFLICT DO NOTHING;

CREATE OR REPLACE PROCEDURE bench_ceiling_min(ns text, bsize int)
LANGUAGE plpgsql AS $$
DECLARE
  lo bigint := 0;
  hi bigint;
  parts int;
  keys text[]; offs bigint[]; uids bigint[]; amts bigint[];
  fresh text[]; fu bigint[]; fa bigint[]; fk text[];
BEGIN
  SELECT max(seq) INTO hi FROM bench_work;
  SELECT count(*) INTO parts FROM dedupd.offsets WHERE namespace = ns AND topic = 'ceiling_min';
  WHILE lo < hi LOOP
    -- the batch, first occurrence of each key (as in ceiling.sql)
    SELECT array_agg(k ORDER BY k), array_agg(seq ORDER BY k), array_agg(user_id ORDER BY k),
           array_agg(amount ORDER BY k)
    INTO keys, offs, uids, amts
    FROM (SELECT DISTINCT ON (k) * FROM bench_work WHERE seq > lo AND seq <= lo + bsize ORDER BY k, seq) w;

    -- 1. the claim: the key and where it came from, nothing else
    WITH c AS (
      INSERT INTO dedupd.keys (namespace, idem_key, status, topic, partition, "offset")
      SELECT ns, u.k, 'DONE', 'ceiling_min', (u.o % parts)::int, u.o
      FROM unnest(keys, offs) AS u(k, o) ORDER BY u.k COLLATE "C"
      ON CONFLICT (namespace, idem_key) DO NOTHING
      RETURNING idem_key)
    SELECT coalesce(array_agg(idem_key), '{}') INTO fresh FROM c;

    IF cardinality(fresh) > 0 THEN
      SELECT array_agg(u.k), array_agg(u.uid), array_agg(u.amt) INTO fk, fu, fa
      FROM unnest(keys, uids, amts) AS u(k, uid, amt) JOIN unnest(fresh) AS fr(k) ON fr.k = u.k;

      -- 2. lock the accounts in user_id order and debit them (as in ceiling.sql)
      WITH locked AS (SELECT a.user_id, a.balance FROM account a
                      WHERE a.user_id = ANY(fu) ORDER BY a.user_id FOR UPDATE)
      UPDATE account a SET balance = l.balance - d.total
      FROM (SELECT uid, sum(amt) AS total FROM unnest(fu, fa) AS u(uid, amt) GROUP BY uid) d
      JOIN locked l ON l.user_id = d.uid
      WHERE a.user_id = d.uid;

      -- 3. the ledger
      INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT * FROM unnest(fk, fu, fa);
    END IF;

    -- 4. progress, per partition (no history)
    UPDATE dedupd.offsets o SET next_offset = u.next_offset, consumed = o.consumed + u.consumed
    FROM (SELECT (seq % parts)::int AS partition, count(*) AS consumed, max(seq) + 1 AS next_offset
          FROM bench_work WHERE seq > lo AND seq <= lo + bsize GROUP BY 1) u
    WHERE o.namespace = ns AND o.topic = 'ceiling_min' AND o.partition = u.partition;

    COMMIT;
    lo := lo + bsize;
  END LOOP;
END $$;
