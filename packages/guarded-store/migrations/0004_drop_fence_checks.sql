-- The fence table's CHECK constraints go; the primary key and the NOT NULLs stay.
--
-- Postgres (15) turns every CHECK constraint of a table back from its catalog text into an expression and
-- prepares it in each statement that writes a row of that table: for the fence's three checks, about 70 000
-- instructions of the backend per guarded transaction, a fifth of all its work in a one-UPDATE transaction
-- (callgrind; docs/benchmarks.md, issue 21). None of them is part of a promise (G1–G5 of DESIGN §1): the store
-- validates every value before any statement reaches Postgres (a resource name is 1–256 bytes of UTF-8, a token
-- 1 … 2^63−1, the lease id is stored as its 32-byte sha256 digest), on the write path and in resetFence alike,
-- and a row that broke them could only deny writes, never admit a stale one (an equal token passes only with
-- an equal digest). fence_operation and fence_reset keep theirs: nothing writes them on every transaction.
--
-- Unqualified names: the migrator runs each file with search_path set to the store's schema.
-- Append-only: never edit this file once released; add a new NNNN_description.sql instead.
alter table fence
  drop constraint if exists fence_resource_check,
  drop constraint if exists fence_token_check,
  drop constraint if exists fence_lease_id_hash_check;
