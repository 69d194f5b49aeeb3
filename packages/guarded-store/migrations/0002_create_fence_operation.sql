-- Operation ids of guarded writes (G5): a retried write with the same op id returns `result` instead of
-- running again. One row per fenced resource of the write, inserted in the write's own transaction, so the row
-- exists exactly when the write committed. Rows are written only while the resource's fence row is locked.
--
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
create table fence_operation (
  resource   text        not null,
  op_id      text        not null check (octet_length(op_id) between 1 and 255),
  token      bigint      not null check (token >= 1),
  -- JSON text of the write's result, exactly as first returned (json, not jsonb, keeps key order); null when
  -- the write returned nothing.
  result     json,
  created_at timestamptz not null default now(),
  primary key (resource, op_id)
);

create index fence_operation_created_at on fence_operation (created_at);
