#!/usr/bin/env python3
"""How long a durable commit's fsync takes on this disk, back to back and with idle gaps
between the commits, as a group commit's flushes have them at few clients (BENCHMARKS.md).

Each round writes SIZE bytes at the end of a file (wrapping at 4 MB, as a WAL restarts after
a checkpoint), calls fsync and times that call, then sleeps GAP microseconds (0: the next
round at once). A flush at 8 clients is followed by the answers and the clients' next
requests before the next commit: the disk (and, on a virtual machine, the host) sees a gap
of some hundred microseconds between syncs. Prints, per size and gap, the fsync's p50, p90,
p99 and mean in microseconds.

    python3 scripts/bench/fsync-gaps.py                      # 8 and 64 KB; gaps 0, 250, 500, 1000 us
    python3 scripts/bench/fsync-gaps.py --sizes 65536 --gaps 0,500 --rounds 5000 --dir /data

The file lives in a temporary folder of --dir (default: the system's temp folder, where the
bench keeps its SQLite database) and is removed at the end. Needs only python3.
"""

import argparse
import os
import tempfile
import time

WRAP = 4 << 20


def ints(text):
    return [int(x) for x in text.split(',') if x.strip()]


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def measure(fd, size, gap_us, rounds):
    data = os.urandom(size)
    offset = 0
    times = []
    for _ in range(rounds):
        os.pwrite(fd, data, offset)
        offset = (offset + size) % WRAP
        start = time.perf_counter()
        os.fsync(fd)
        times.append((time.perf_counter() - start) * 1e6)
        if gap_us:
            # time.sleep's own overshoot is part of the gap, as a real gap has its own.
            time.sleep(gap_us / 1e6)
    times.sort()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', type=ints, default=[8192, 65536],
                        help='bytes written before each fsync (comma-separated)')
    parser.add_argument('--gaps', type=ints, default=[0, 250, 500, 1000],
                        help='microseconds of sleep after each fsync (comma-separated)')
    parser.add_argument('--rounds', type=int, default=2000)
    parser.add_argument('--dir', default=None, help='where the file is written')
    args = parser.parse_args()
    if args.rounds < 1 or any(s < 1 for s in args.sizes) or any(g < 0 for g in args.gaps):
        parser.error('--rounds and --sizes must be positive, --gaps not negative')

    with tempfile.TemporaryDirectory(prefix='jobstore-fsync-', dir=args.dir) as folder:
        path = os.path.join(folder, 'wal')
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            # The file at its full size first, as a WAL that has wrapped once.
            os.pwrite(fd, bytes(WRAP), 0)
            os.fsync(fd)
            print(f'fsync in {folder}, {args.rounds} rounds per line')
            print('| bytes | gap µs | fsync p50 µs | p90 | p99 | mean |')
            print('|---:|---:|---:|---:|---:|---:|')
            for size in args.sizes:
                for gap in args.gaps:
                    t = measure(fd, size, gap, args.rounds)
                    mean = sum(t) / len(t)
                    print(f'| {size} | {gap} | {percentile(t, 0.5):.0f} | '
                          f'{percentile(t, 0.9):.0f} | {percentile(t, 0.99):.0f} | {mean:.0f} |')
        finally:
            os.close(fd)


if __name__ == '__main__':
    main()
