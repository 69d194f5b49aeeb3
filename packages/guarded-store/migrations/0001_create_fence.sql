-- The fence of DESIGN §4: one row per resource holding the highest fencing token a guarded transaction has
-- committed for it. A guarded transaction raises (and so locks) this row in its first statement and holds the
-- lock until it commits or rolls back, which orders the guarded transactions of a resource by token (G1).
--
-- Unqualified names: the migrator runs each file with search_path set to the store's schema.
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
create table fence (
  resource      text        primary key check (octet_length(resource) between 1 and 256),
  token         bigint      not null check (token >= 1),
  -- sha256 of the lease id that raised the fence to `token`, null when the writer named no lease. An equal
  -- token is accepted only when both sides carry the same digest. A digest, not the id: a lease id is the
  -- capability to extend or release the lease, and nobody who can read this table should hold it.
  lease_id_hash bytea       check (octet_length(lease_id_hash) = 32),
  updated_at    timestamptz not null default now()
);
