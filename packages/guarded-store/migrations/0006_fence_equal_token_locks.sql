-- The SQL function's fence step, fence_raise (0005_create_fence_function.sql), again as the store's own fence
-- statements run it (packages/guarded-store/src/fence-statement.ts): an equal token from the same lease locks the
-- fence row and writes nothing. Before, it rewrote the row with the same token and digest: a new row version
-- (its WAL, a dead version to prune) for a row lock that SELECT … FOR UPDATE takes as well.
--
-- The rules stay: a token below the fence is refused; an equal token only from the lease that set it (a null
-- digest equals nothing); a higher one raises the fence; the row is locked until the transaction ends, so the
-- guarded transactions of a resource commit one at a time, in token order (G1). Under READ COMMITTED each
-- statement below takes a new snapshot, and a SELECT … FOR UPDATE, an UPDATE or an ON CONFLICT DO UPDATE that
-- waited for a concurrent holder re-checks its condition on the version that holder committed:
--
-- 1. lock the row if its latest version holds this token from this lease (a second transaction of the same lease
--    waits for the first's COMMIT, then locks it; nothing is written);
-- 2. else raise the row if its token is lower (a higher token arriving while an equal one holds the lock waits
--    for that COMMIT, then raises: token order);
-- 3. else insert the row, or lock the latest version (ON CONFLICT DO UPDATE locks even when its WHERE is false)
--    and raise it only if lower (inserted or raised: fenced); else the row is locked by this transaction, and a
--    new statement reads the fence as it stands until COMMIT: this token from this lease (the race of two
--    transactions of one lease, the second of which saw the row below its token), or refused with the current
--    token.
--
-- Same name, arguments and result as in 0005, so fence, fence_all and fence_each call it unchanged; it keeps
-- their search_path (SET search_path FROM CURRENT: the store's schema, set by the migrator).
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
create or replace function fence_raise(p_resource text, p_token bigint, p_hash bytea) returns bigint
language plpgsql volatile set search_path from current as $$
declare
  v_token bigint;
  v_same boolean;
begin
  perform from fence as f
   where f.resource = p_resource and f.token = p_token and f.lease_id_hash = p_hash
     for update;
  if found then
    return null;
  end if;
  update fence as f set token = p_token, lease_id_hash = p_hash, updated_at = now()
   where f.resource = p_resource and f.token < p_token;
  if found then
    return null;
  end if;
  -- No row in the snapshots, or refused: decide on the latest version, inserting the row or locking it.
  insert into fence as f (resource, token, lease_id_hash) values (p_resource, p_token, p_hash)
  on conflict (resource) do update
     set token = excluded.token, lease_id_hash = excluded.lease_id_hash, updated_at = now()
   where f.token < excluded.token;
  if found then
    return null;
  end if;
  -- A new statement: the row is locked by us now; it sees what the holder we waited for committed.
  select f.token, coalesce(f.lease_id_hash = p_hash, false) into v_token, v_same
    from fence as f where f.resource = p_resource;
  if v_token = p_token and v_same then
    return null;
  end if;
  return coalesce(v_token, 0);
end
$$;
