-- The audit log of administrative fence resets (DESIGN §4b). A fence raised by a forged or misplaced token
-- (one the coordinator never granted, accepted before the store verified proofs) locks out every honest holder
-- of that resource. `GuardedStore.resetFence` lowers such a fence by hand, and records here who did it, why, and
-- from which token to which, in the same transaction as the reset. Nothing on the write path writes here.
--
-- The table is append-only: rows are inserted, never updated or deleted (the trigger below refuses both, and
-- TRUNCATE), so the log keeps every reset that ever happened.
--
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
create table fence_reset (
  id         bigint      generated always as identity primary key,
  resource   text        not null check (octet_length(resource) between 1 and 256),
  from_token bigint      not null check (from_token >= 1),
  to_token   bigint      not null check (to_token >= 1 and to_token < from_token),
  reason     text        not null check (length(btrim(reason)) between 1 and 1000),
  actor      text        not null check (length(btrim(actor)) between 1 and 200),
  reset_at   timestamptz not null default now()
);

create index fence_reset_resource on fence_reset (resource, reset_at);

create function fence_reset_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'fence_reset is an append-only audit log: % is not allowed', tg_op;
end
$$;

create trigger fence_reset_append_only
  before update or delete or truncate on fence_reset
  for each statement execute function fence_reset_append_only();
