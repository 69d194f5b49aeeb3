-- Tables of the example service (src/example). Kept apart from the store's own migrations, with their own
-- migration table, so an application embedding the store never gets them.
--
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
create table example_document (
  id         text        primary key,
  content    text        not null,
  -- Number of accepted writes: with the guard, each accepted PUT adds exactly one.
  version    bigint      not null,
  -- Token of the write that produced this content, so a history checker can see stale writes.
  token      bigint      not null,
  updated_at timestamptz not null default now()
);

create table example_account (
  id         text        primary key,
  balance    bigint      not null,
  -- Number of accepted deposits: with reads inside the guard, balance = sum of accepted amounts.
  deposits   bigint      not null,
  token      bigint      not null,
  updated_at timestamptz not null default now()
);
