#!/usr/bin/env python3
"""The pages a group commit's batch writes to SQLite's WAL, on the result tables as a given
migration leaves them (BENCHMARKS.md).

Applies migrations/sqlite up to each version asked for on a fresh file (WAL,
synchronous=FULL, automatic checkpoints off), then runs batches as the flush does at C
steady clients of the create+clean cycle: each transaction marks clean the C/2 entries the
previous one created and creates C/2 new ones (random job ids; one create in 20 carries
Flink's 36 KB failure-cause, the others Flink's small files), with the statements of
src/store/sql/common/job_results_{insert,mark_clean}.sql. Prints, per version and C, the
WAL frames (4 KB pages) one transaction wrote, its mean time, and the entries left dirty
at the end (the last transaction's creates: C/2).

    python3 scripts/bench/sqlite-pages.py              # versions 12 and 14, C = 8 and 32
    python3 scripts/bench/sqlite-pages.py --versions 14 --clients 32 --batches 1000

Needs only python3 (its sqlite3 module: JSON functions and STRICT tables, SQLite 3.37 or
later). The file lives in a temporary folder, removed at the end.
"""

import argparse
import json
import os
import random
import re
import sqlite3
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


def statement(name):
    """One of the store's statements, written for SQLite as build.rs writes it."""
    text = (ROOT / "src/store/sql/common" / f"{name}.sql").read_text()
    sql = " ".join(line for line in text.splitlines() if not line.startswith("--"))
    sql = sql.replace("{now}", NOW)
    return re.sub(r"\{json\((:\w+)\)\}", r"\1", sql)


def migrate(db, version):
    files = sorted(
        (ROOT / "migrations/sqlite").glob("V*__*.sql"),
        key=lambda p: int(p.name[1:].split("__")[0]),
    )
    for path in files:
        if int(path.name[1:].split("__")[0]) <= version:
            db.executescript(path.read_text())


def results():
    folder = ROOT / "tests/data/flink-2.3.0/job-result-store"
    files = sorted((p.read_text() for p in folder.glob("*.json")), key=len)
    return [json.loads(f)["result"] for f in files[:-1]], json.loads(files[-1])["result"]


def run(version, clients, batches, warm_batches, folder):
    path = os.path.join(folder, f"v{version}-c{clients}.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    migrate(db, version)
    insert, clean = statement("job_results_insert"), statement("job_results_mark_clean")
    small, large = results()
    rng = random.Random(version * 1000 + clients)
    created = []

    def batch():
        nonlocal created
        db.execute("BEGIN IMMEDIATE")
        for job in created:
            db.execute(clean, {"cluster": "bench-cycle", "id": job}).fetchall()
        created = []
        for _ in range(clients // 2):
            job = os.urandom(16).hex()
            result = dict(large if rng.random() < 0.05 else rng.choice(small), id=job)
            row = {"cluster": "bench-cycle", "id": job, "state": "dirty",
                   "result": json.dumps(result)}
            db.execute(insert, row).fetchall()
            created.append(job)
        db.execute("COMMIT")

    for _ in range(warm_batches):
        batch()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    start = time.perf_counter()
    for _ in range(batches):
        batch()
    elapsed = time.perf_counter() - start
    frames = (os.path.getsize(path + "-wal") - 32) / (4096 + 24)
    dirty = db.execute("SELECT count(*) FROM job_results WHERE state = 'dirty'").fetchone()[0]
    db.close()
    return frames / batches, elapsed / batches * 1000, dirty


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default="12,14")
    parser.add_argument("--clients", default="8,32")
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--warm-entries", type=int, default=20000,
                        help="entries created (and cleaned) before the measured batches")
    args = parser.parse_args()
    print(f"SQLite {sqlite3.sqlite_version}")
    print("| schema | clients | WAL frames per transaction | ms per transaction | dirty at the end |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for version in (int(v) for v in args.versions.split(",")):
            for clients in (int(c) for c in args.clients.split(",")):
                warm = max(1, args.warm_entries // (clients // 2))
                frames, ms, dirty = run(version, clients, args.batches, warm, folder)
                print(f"| V{version} | {clients} | {frames:.1f} | {ms:.3f} | {dirty} |")


if __name__ == "__main__":
    main()
