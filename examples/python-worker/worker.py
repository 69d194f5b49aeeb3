#!/usr/bin/env python3
"""A worker in Python: a lease from the fenced coordinator service over HTTP, and its Postgres transaction fenced
by the guard's SQL function, one statement:

    select <schema>.fence(resource, token, sha256(lease id) as 64 hex digits)

raised first in the transaction. A stale token (a later lease has written) fails that statement with SQLSTATE
FN001, and the transaction rolls back before anything is written. No fenced library code in Python: the rules
live in the SQL function (packages/guarded-store/migrations/0005_create_fence_function.sql).

    FENCED_COORDINATOR_URL=http://127.0.0.1:8080 FENCED_DATABASE_URL=postgres://127.0.0.1/app \
      python3 examples/python-worker/worker.py deposit 42 10

deposits 10 into account 42 (table `account (id text primary key, balance bigint)`) under a lease on
`account:42`. `--lease-json '{"leaseId": …, "token": …}'` writes under a lease taken earlier instead (what a
paused worker holds when it resumes). Environment: FENCED_SCHEMA (the guard's schema, default public),
FENCED_API_KEY (when the service wants one). Exit codes: 0 written, 3 refused as stale, 2 bad usage.

Needs psycopg 3 (Debian: apt-get install python3-psycopg; else pip install psycopg).
"""

import argparse
import hashlib
import json
import os
import sys
import urllib.parse
import urllib.request

import psycopg
from psycopg import sql

STALE_TOKEN = "FN001"  # the guard's SQLSTATE for a refused token


def call(method, path, body=None):
    """One request to the coordinator service; the parsed JSON answer (None for 204)."""
    url = os.environ.get("FENCED_COORDINATOR_URL", "http://127.0.0.1:8080").rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    if os.environ.get("FENCED_API_KEY"):
        request.add_header("authorization", "Bearer " + os.environ["FENCED_API_KEY"])
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
        return json.loads(text) if text else None


def leases_path(resource):
    return "/v1/locks/" + urllib.parse.quote(resource, safe="") + "/leases"


def acquire(resource, ttl_ms=10_000, wait_ms=5_000):
    return call("POST", leases_path(resource), {"ttlMs": ttl_ms, "waitMs": wait_ms})


def release(resource, lease_id):
    call("DELETE", leases_path(resource) + "/" + urllib.parse.quote(lease_id, safe=""))


def lease_hash(lease_id):
    """What the fence stores and compares: sha256 of the lease id, never the id itself."""
    return hashlib.sha256(lease_id.encode()).hexdigest()


def deposit(conn, schema, resource, lease, account, amount):
    """One fenced transaction: the fence first, then the read-modify-write it protects."""
    with conn.transaction():
        conn.execute(
            sql.SQL("select {}.fence(%s, %s, %s)").format(sql.Identifier(schema)),
            (resource, int(lease["token"]), lease_hash(lease["leaseId"])),
        )
        row = conn.execute("select balance from account where id = %s for update", (account,)).fetchone()
        balance = (row[0] if row else 0) + amount
        conn.execute(
            "insert into account (id, balance) values (%s, %s)"
            " on conflict (id) do update set balance = excluded.balance",
            (account, balance),
        )
        return balance


def main():
    parser = argparse.ArgumentParser(description="deposit into an account under a fenced lease")
    parser.add_argument("command", choices=["deposit"])
    parser.add_argument("account")
    parser.add_argument("amount", type=int)
    parser.add_argument("--lease-json", help="write under this lease instead of taking one")
    args = parser.parse_args()
    database_url = os.environ.get("FENCED_DATABASE_URL")
    if not database_url:
        print("FENCED_DATABASE_URL is not set (a postgres:// URL of the guarded database)", file=sys.stderr)
        return 2
    schema = os.environ.get("FENCED_SCHEMA", "public")
    resource = "account:" + args.account
    lease = json.loads(args.lease_json) if args.lease_json else acquire(resource)
    try:
        with psycopg.connect(database_url) as conn:
            balance = deposit(conn, schema, resource, lease, args.account, args.amount)
        print(json.dumps({"written": True, "token": lease["token"], "balance": balance}))
        return 0
    except psycopg.Error as error:
        if error.sqlstate != STALE_TOKEN:
            raise
        # The DETAIL carries the same as JSON: resource, presented and current token.
        detail = json.loads(error.diag.message_detail or "{}")
        print(json.dumps({"written": False, "stale": detail, "message": error.diag.message_primary}))
        return 3
    finally:
        if not args.lease_json:
            release(resource, lease["leaseId"])


if __name__ == "__main__":
    sys.exit(main())
