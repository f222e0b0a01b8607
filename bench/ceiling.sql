-- bench/ceiling.sql — the ceiling of bench/run: the statements dedupd and the
-- transfer handler send per batch, driven inside the server, so no client
-- round trip, no Kafka and no parsing in C is in the way. Per batch of the
-- workload (bench_work, loaded and parsed by bench/run): claim every key
-- (fingerprint included), read the first outcome of the keys seen before (the
-- duplicate path), lock the accounts and read their balances, write the new
-- balances, the ledger and the responses, upsert the progress and its history;
-- COMMIT.
-- Arrays and unnest, as dedupd binds them. bench/ceiling_min.sql is the same
-- without what the bookkeeping adds beyond the claim and the offsets.
--
--   psql -v parts=4 -f bench/ceiling.sql;  CALL bench_ceiling('bench', 1000);

INSERT INTO dedupd.offsets (namespace, topic, partition, next_offset)
SELECT 'bench', 'ceiling', p, 0 FROM generate_series(0, :parts - 1) AS p
ON CONFLICT DO NOTHING;

CREATE OR REPLACE PROCEDURE bench_ceiling(ns text, bsize int)
LANGUAGE plpgsql AS $$
DECLARE
  lo bigint := 0;
  hi bigint;
  parts int;
  keys text[]; fps bytea[]; offs bigint[]; uids bigint[]; amts bigint[];
  fresh text[]; seen text[]; fk text[]; fu bigint[]; fa bigint[];
  known int;
BEGIN
  SELECT max(seq) INTO hi FROM bench_work;
  SELECT count(*) INTO parts FROM dedupd.offsets WHERE namespace = ns AND topic = 'ceiling';
  WHILE lo < hi LOOP
    -- the batch, first occurrence of each key (what dedupd binds)
    SELECT array_agg(k ORDER BY k), array_agg(sha256(convert_to(payload, 'UTF8')) ORDER BY k),
           array_agg(seq ORDER BY k), array_agg(user_id ORDER BY k), array_agg(amount ORDER BY k)
    INTO keys, fps, offs, uids, amts
    FROM (SELECT DISTINCT ON (k) * FROM bench_work WHERE seq > lo AND seq <= lo + bsize ORDER BY k, seq) w;

    -- 1. the claim
    WITH c AS (
      INSERT INTO dedupd.keys (namespace, idem_key, status, fingerprint, topic, partition, "offset")
      SELECT ns, u.k, 'DONE', u.f, 'ceiling', (u.o % parts)::int, u.o
      FROM unnest(keys, fps, offs) AS u(k, f, o) ORDER BY u.k COLLATE "C"
      ON CONFLICT (namespace, idem_key) DO NOTHING
      RETURNING idem_key)
    SELECT coalesce(array_agg(idem_key), '{}') INTO fresh FROM c;

    -- 2. the first outcomes of the keys seen before
    SELECT coalesce(array_agg(u.k), '{}') INTO seen
    FROM unnest(keys) AS u(k) LEFT JOIN unnest(fresh) AS f(k) ON f.k = u.k WHERE f.k IS NULL;
    SELECT count(response) INTO known FROM dedupd.keys WHERE namespace = ns AND idem_key = ANY(seen);

    IF cardinality(fresh) > 0 THEN
      SELECT array_agg(u.k), array_agg(u.uid), array_agg(u.amt) INTO fk, fu, fa
      FROM unnest(keys, uids, amts) AS u(k, uid, amt) JOIN unnest(fresh) AS fr(k) ON fr.k = u.k;

      -- 3. lock and read the accounts in user_id order, 4. the new balances
      WITH locked AS (SELECT a.user_id, a.balance FROM account a
                      WHERE a.user_id = ANY(fu) ORDER BY a.user_id FOR UPDATE)
      UPDATE account a SET balance = l.balance - d.total
      FROM (SELECT uid, sum(amt) AS total FROM unnest(fu, fa) AS u(uid, amt) GROUP BY uid) d
      JOIN locked l ON l.user_id = d.uid
      WHERE a.user_id = d.uid;

      -- 5. the ledger
      INSERT INTO transfer_ledger (idem_key, user_id, amount) SELECT * FROM unnest(fk, fu, fa);

      -- 6. the responses
      UPDATE dedupd.keys d SET response = 'OK: debited ' || u.amt, updated_at = now()
      FROM unnest(fk, fa) AS u(k, amt)
      WHERE d.namespace = ns AND d.idem_key = u.k;
    END IF;

    -- 7. progress and its history, per partition
    WITH u AS (
      SELECT (seq % parts)::int AS partition, count(*) AS consumed, max(seq) + 1 AS next_offset
      FROM bench_work WHERE seq > lo AND seq <= lo + bsize GROUP BY 1),
    log AS (
      INSERT INTO dedupd.progress_log (namespace, topic, partition, from_offset, next_offset, consumed,
                                       applied, rejected, duplicates, dead_lettered, mismatches)
      SELECT ns, 'ceiling', partition, lo, next_offset, consumed, 0, 0, 0, 0, 0 FROM u)
    UPDATE dedupd.offsets o SET next_offset = u.next_offset, consumed = o.consumed + u.consumed
    FROM u WHERE o.namespace = ns AND o.topic = 'ceiling' AND o.partition = u.partition;

    COMMIT;
    lo := lo + bsize;
  END LOOP;
END $$;
