-- The fence as SQL functions (issue 36): any transaction, from any client in any language, fences itself with
-- one statement, `select <schema>.fence('invoice:42', 1883, '<sha256 of the lease id, 64 hex digits>')`, under
-- exactly the rules of the store's own fence statement (packages/guarded-store/src/fence-statement.ts):
--
-- - a token below the fence is refused; an equal token only from the lease that set it (same lease_id_hash;
--   no lease never equals anything); a higher one raises the fence;
-- - the fence row is locked until the transaction ends, so the guarded transactions of a resource commit one
--   at a time, in token order (G1). Under READ COMMITTED each statement below takes a new snapshot, and an
--   UPDATE (or ON CONFLICT DO UPDATE) that waited for a concurrent holder re-checks its condition on the version
--   that holder committed;
-- - several resources are fenced in UTF-8 byte order of their names, the order the store uses, so two
--   transactions over overlapping sets cannot deadlock on the fences, whichever path they came through;
-- - synchronous_commit is set to on for the transaction (G1 assumes a durable COMMIT), and lock_timeout and
--   idle_in_transaction_session_timeout get the store's defaults (10 s, 5 s) when the caller left them at 0.
--
-- The functions: fence(resource, token, lease_hash) for one resource, fence_all(resources, tokens, lease_hash)
-- for several of one lease, fence_each(resources, tokens, lease_hashes, op_id) for several leases, and with an
-- operation id (G5) fence(…, op_id) and fence_all(…, op_id), then record_operation(…) / record_operation_all(…)
-- before COMMIT. `lease_hash` is the sha256 of the lease id as 64 hex digits (null: the write names no lease).
--
-- A refused token raises SQLSTATE FN001 (class FN: fenced), message naming the resource, the presented and the
-- current token, and a DETAIL with the same as JSON: {"resource", "presented", "current", "named_lease"} (tokens
-- as strings: they reach 2^63 − 1). Bad arguments raise 22023 (invalid_parameter_value) naming what was given
-- and what is allowed. Nothing is written when either is raised, and the transaction is aborted.
--
-- Unqualified names: the migrator runs each file with search_path set to the store's schema, and every function
-- keeps that search_path (SET search_path FROM CURRENT), so a caller's own search_path cannot redirect it.
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.

-- The arguments, checked as the store checks them; returns the lease digest (null without a lease).
create function fence_check(p_resource text, p_token bigint, p_lease_hash text) returns bytea
language plpgsql immutable set search_path from current as $$
begin
  if p_resource is null or octet_length(p_resource) not between 1 and 256 then
    raise exception using errcode = '22023',
      message = format('fence: resource must be 1 to 256 UTF-8 bytes, got %s',
                       coalesce(octet_length(p_resource)::text || ' bytes', 'null'));
  end if;
  if p_resource ~ '[\x01-\x1f\x7f-\x9f]' then
    raise exception using errcode = '22023', message = 'fence: resource must not contain control characters';
  end if;
  if p_token is null or p_token < 1 then
    raise exception using errcode = '22023',
      message = format('fence: token must be a whole number from 1 to 9223372036854775807, got %s',
                       coalesce(p_token::text, 'null'));
  end if;
  if p_lease_hash is null then
    return null;
  end if;
  if p_lease_hash !~ '^[0-9a-fA-F]{64}$' then
    raise exception using errcode = '22023',
      message = format('fence: lease_hash must be the sha256 of the lease id as 64 hex digits (or null for no lease), got %s characters',
                       length(p_lease_hash));
  end if;
  return decode(p_lease_hash, 'hex');
end
$$;

-- The transaction's settings, before the first fence statement waits for anything.
create function fence_settings() returns void
language plpgsql volatile set search_path from current as $$
begin
  perform set_config('synchronous_commit', 'on', true);
  if current_setting('lock_timeout') = '0' then
    perform set_config('lock_timeout', '10000', true);
  end if;
  if current_setting('idle_in_transaction_session_timeout') = '0' then
    perform set_config('idle_in_transaction_session_timeout', '5000', true);
  end if;
end
$$;

-- Raises one fence row (steps 1 and 2 of fence-statement.ts). Returns null when raised (or re-entered by the
-- same lease), else the current token: the caller refuses.
create function fence_raise(p_resource text, p_token bigint, p_hash bytea) returns bigint
language plpgsql volatile set search_path from current as $$
declare
  v_current bigint;
begin
  update fence as f set token = p_token, lease_id_hash = p_hash, updated_at = now()
   where f.resource = p_resource
     and (f.token < p_token or (f.token = p_token and f.lease_id_hash = p_hash));
  if found then
    return null;
  end if;
  -- No row in the snapshot, or refused: decide on the latest version, inserting the row or locking it.
  insert into fence as f (resource, token, lease_id_hash) values (p_resource, p_token, p_hash)
  on conflict (resource) do update
     set token = excluded.token, lease_id_hash = excluded.lease_id_hash, updated_at = now()
   where f.token < excluded.token
      or (f.token = excluded.token and f.lease_id_hash = excluded.lease_id_hash);
  if found then
    return null;
  end if;
  -- A new statement: it sees what the holder we waited for committed (the row is locked by us now).
  select f.token into v_current from fence as f where f.resource = p_resource;
  return coalesce(v_current, 0);
end
$$;

-- The stale-token error, FN001.
create function fence_refuse(p_resource text, p_token bigint, p_current bigint, p_named boolean) returns void
language plpgsql immutable set search_path from current as $$
begin
  raise exception using errcode = 'FN001',
    message = case
      when p_token = p_current then
        format('fencing token %s for resource %s equals the fence, which another lease (or a write naming no lease) set: an equal token is accepted only from the lease that set the fence',
               p_token, to_json(p_resource)::text)
      else
        format('stale fencing token for resource %s: presented %s, current %s', to_json(p_resource)::text,
               p_token, p_current)
    end,
    detail = json_build_object('resource', p_resource, 'presented', p_token::text,
                               'current', p_current::text, 'named_lease', p_named)::text,
    hint = 'this holder lost the resource: stop, and take a new lease before writing again';
end
$$;

-- Fences several resources, each with its own lease digest, in UTF-8 byte order of their names. Returns the
-- index (1-based, into the arrays as given) of the first refused fence and its current token, or nulls.
create function fence_many(p_resources text[], p_tokens bigint[], p_lease_hashes text[],
                           out refused integer, out current_token bigint)
language plpgsql volatile set search_path from current as $$
declare
  v_n integer := coalesce(cardinality(p_resources), 0);
  v_hashes bytea[] := '{}';
  v_row record;
begin
  if v_n = 0 then
    raise exception using errcode = '22023', message = 'fence: at least one resource is needed';
  end if;
  if coalesce(cardinality(p_tokens), 0) <> v_n or coalesce(cardinality(p_lease_hashes), 0) <> v_n then
    raise exception using errcode = '22023',
      message = format('fence: resources, tokens and lease hashes must have the same length, got %s, %s and %s',
                       v_n, coalesce(cardinality(p_tokens), 0), coalesce(cardinality(p_lease_hashes), 0));
  end if;
  for i in 1 .. v_n loop
    v_hashes := v_hashes || fence_check(p_resources[i], p_tokens[i], p_lease_hashes[i]);
  end loop;
  if (select count(distinct r) from unnest(p_resources) as r) <> v_n then
    raise exception using errcode = '22023',
      message = 'fence: each resource may appear only once in a guarded transaction';
  end if;
  perform fence_settings();
  for v_row in
    select u.i from unnest(p_resources) with ordinality as u (resource, i)
     order by convert_to(u.resource, 'UTF8')
  loop
    current_token := fence_raise(p_resources[v_row.i], p_tokens[v_row.i], v_hashes[v_row.i]);
    if current_token is not null then
      refused := v_row.i;
      return;
    end if;
  end loop;
end
$$;

-- A committed operation with this id on any of the resources (G5): its result.
create function fence_find_operation(p_resources text[], p_op_id text, out found_op boolean, out result json)
language plpgsql volatile set search_path from current as $$
begin
  select true, o.result into found_op, result
    from fence_operation as o
   where o.op_id = p_op_id and o.resource = any(p_resources)
   limit 1;
  found_op := coalesce(found_op, false);
end
$$;

create function fence_check_op_id(p_op_id text) returns void
language plpgsql immutable set search_path from current as $$
begin
  if p_op_id is null or p_op_id !~ '^[\x21-\x7e]{1,255}$' then
    raise exception using errcode = '22023',
      message = format('fence: operation id must be 1 to 255 visible ASCII characters (no spaces), got %s',
                       coalesce(length(p_op_id)::text || ' characters', 'null'));
  end if;
end
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- The public functions. Distinct names for the array forms, so that a call with untyped parameters
-- (`fence($1, $2, $3)` from any driver) resolves to exactly one function.

-- One resource. Raises FN001 when stale.
create function fence(resource text, token bigint, lease_hash text default null) returns void
language plpgsql volatile set search_path from current as $$
declare
  v_refused record;
begin
  select * into v_refused from fence_many(array[$1], array[$2], array[$3]);
  if v_refused.refused is not null then
    perform fence_refuse($1, $2, v_refused.current_token, $3 is not null);
  end if;
end
$$;

-- Several resources, each with its own lease digest (null: no lease), locked in the guard's order; with an
-- operation id (G5), `replayed` is true when a transaction with this id already committed on one of the
-- resources, and `result` is what it recorded: the caller then writes nothing and answers with that result.
-- That holds even when the fence has moved on since (the retry of a write that did commit still gets its
-- answer). Otherwise the fences are raised (FN001 naming the first refused resource in the guard's order), and a
-- caller with an operation id does its writes and then calls record_operation_all before COMMIT. This is the
-- form the library's adapters call.
create function fence_each(resources text[], tokens bigint[], lease_hashes text[], op_id text default null,
                           out replayed boolean, out result json)
language plpgsql volatile set search_path from current as $$
declare
  v_refused record;
  v_op record;
begin
  if $4 is not null then
    perform fence_check_op_id($4);
  end if;
  select * into v_refused from fence_many($1, $2, $3);
  if $4 is not null then
    -- After the fence, a new statement: it sees an operation committed by the holder the fence waited for.
    select * into v_op from fence_find_operation($1, $4);
    if v_op.found_op then
      replayed := true;
      result := v_op.result;
      return;
    end if;
  end if;
  if v_refused.refused is not null then
    perform fence_refuse($1[v_refused.refused], $2[v_refused.refused], v_refused.current_token,
                         $3[v_refused.refused] is not null);
  end if;
  replayed := false;
end
$$;

-- Several resources of one lease (a multi-resource lease: one id, a token per resource).
create function fence_all(resources text[], tokens bigint[], lease_hash text default null) returns void
language sql volatile set search_path from current
as $$ select from fence_each($1, $2, array_fill($3, array[coalesce(cardinality($1), 0)])) $$;

-- Several resources of one lease, with an operation id.
create function fence_all(resources text[], tokens bigint[], lease_hash text, op_id text,
                          out replayed boolean, out result json)
language sql volatile set search_path from current
as $$ select * from fence_each($1, $2, array_fill($3, array[coalesce(cardinality($1), 0)]), $4) $$;

-- One resource with an operation id.
create function fence(resource text, token bigint, lease_hash text, op_id text,
                      out replayed boolean, out result json)
language sql volatile set search_path from current
as $$ select * from fence_each(array[$1], array[$2], array[$3], $4) $$;

-- Records the operation's result (json, null for none) for every fenced resource, before COMMIT. Only valid after
-- the fence of those resources with those tokens in this transaction: refused (55000) otherwise.
create function record_operation_all(resources text[], tokens bigint[], op_id text, result json default null)
returns void
language plpgsql volatile set search_path from current as $$
declare
  v_missing text;
begin
  perform fence_check_op_id($3);
  if coalesce(cardinality($1), 0) = 0 or coalesce(cardinality($2), 0) <> cardinality($1) then
    raise exception using errcode = '22023',
      message = 'record_operation: resources and tokens must be non-empty and of the same length';
  end if;
  select u.resource into v_missing
    from unnest($1, $2) as u (resource, token)
    left join fence as f on f.resource = u.resource and f.token = u.token
   where f.resource is null
   limit 1;
  if v_missing is not null then
    raise exception using errcode = '55000',
      message = format('record_operation: resource %s is not fenced at the given token: call fence(…) first, in the same transaction',
                       to_json(v_missing)::text);
  end if;
  insert into fence_operation (resource, op_id, token, result)
  select u.resource, $3, u.token, $4 from unnest($1, $2) as u (resource, token);
end
$$;

-- One resource.
create function record_operation(resource text, token bigint, op_id text, result json default null)
returns void
language sql volatile set search_path from current
as $$ select record_operation_all(array[$1], array[$2], $3, $4) $$;
