#!/usr/bin/env python3
"""Proves, without a Docker engine, that the Dockerfile builds jobstore from a fresh clone.

1. Reads the Dockerfile's build stage (the stage the last stage copies from with
   `COPY --from=`): FROM, WORKDIR, COPY without flags and `RUN cargo build ...` are all it
   understands; any other instruction there (ADD, ENV, ARG, `COPY --from`, `RUN --mount`, a
   shell pipeline, ...) fails the check, as does a `.dockerignore`.
2. Copies exactly the paths its COPY lines name, from the repository's tracked files (`git
   ls-files`: an untracked file or target/ cannot make it pass), into an empty folder laid
   out like the image's file system (WORKDIR `/src` is `ROOT/src`), with Docker's COPY
   rules (a directory's contents go into the destination).
3. Runs the stage's RUN command there, as written, with CARGO_NET_OFFLINE=true (the crates
   come from the local cargo registry cache, which the earlier CI steps fill) and none of
   the caller's CARGO_* or RUSTFLAGS settings (the image has none). The command must use
   `--locked`. The target folder is the copy's own (`ROOT/src/target`, as in the image);
   the intermediate files go to the repository's build folder (CARGO_BUILD_BUILD_DIR), so
   that the dependencies compiled by earlier steps are reused. jobstore itself is compiled
   from the copy: the copied files are newer than anything built before, and the check
   requires cargo's "Compiling jobstore ... (ROOT/src)" line.
4. Checks the last stage against the binary just built: the file it copies from the build
   stage exists and is new; ENTRYPOINT + CMD run (`jobstore serve --help` lists serve's
   flags); every JOBSTORE_* variable of its ENV is a variable the binary reads; the
   HEALTHCHECK's URL is on the port of JOBSTORE_LISTEN and EXPOSE, its tool is installed by
   the stage, and that URL answers 200 when the binary runs as the image runs it (ENV,
   an empty WORKDIR, SQLite by default) on a free local port instead of the image's.

docker-compose.yml is checked by tests/integration/processes.rs (it parses; every jobstore service is
built from this Dockerfile, runs its command and health check).

Environment: DOCKER_CHECK_BUILD_DIR sets the intermediate build folder (default: the
repository's, `${CARGO_BUILD_BUILD_DIR:-${CARGO_TARGET_DIR:-target}}`); DOCKER_CHECK_KEEP=1
keeps the copy. Prints the time of each step. Needs git, cargo and Python 3 (stdlib only).
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
START = time.monotonic()


def log(msg):
    print(f"[docker-check {time.monotonic() - START:6.1f}s] {msg}", file=sys.stderr, flush=True)


def fail(msg):
    print(f"docker-check: FAILED: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


# ---- the Dockerfile ---------------------------------------------------------------------


class Instr:
    def __init__(self, line, keyword, args):
        self.line, self.keyword, self.args = line, keyword, args

    def __str__(self):
        return f"Dockerfile:{self.line}: {self.keyword} {self.args}"


def parse_dockerfile(text):
    """Instructions with their line numbers: comments dropped, continuation lines joined."""
    instrs, buf, first = [], "", None
    lines = text.split("\n")
    for n, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if n == 1 or not instrs and not buf:
            if re.match(r"#\s*(escape|syntax|check)\s*=", stripped, re.I):
                fail(f"Dockerfile:{n}: parser directive {stripped!r} is not understood")
        if stripped.startswith("#") or (not stripped and not buf):
            continue
        if first is None:
            first = n
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1] + " "
            continue
        buf += raw
        keyword, _, args = buf.strip().partition(" ")
        instrs.append(Instr(first, keyword.upper(), args.strip()))
        buf, first = "", None
    if buf:
        fail("Dockerfile: the last instruction ends with a continuation backslash")
    return instrs


def stages(instrs):
    out = []
    for i in instrs:
        if i.keyword == "FROM":
            words = i.args.split()
            if len(words) == 1:
                out.append({"from": i, "image": words[0], "name": None, "instrs": []})
            elif len(words) == 3 and words[1].upper() == "AS":
                out.append({"from": i, "image": words[0], "name": words[2], "instrs": []})
            else:
                fail(f"{i}: only `FROM IMAGE [AS NAME]` is understood")
        elif not out:
            fail(f"{i}: an instruction before the first FROM is not understood")
        else:
            out[-1]["instrs"].append(i)
    if len(out) < 2:
        fail("Dockerfile: expected a build stage and a runtime stage")
    return out


def exec_form(instr):
    """The JSON exec form of ENTRYPOINT/CMD (a list of strings), or fail."""
    try:
        value = json.loads(instr.args)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(f"{instr}: only the JSON exec form is understood")
    return value


def copy_args(instr):
    """The sources and destination of a COPY without flags (shell or JSON form)."""
    if instr.args.startswith("["):
        words = exec_form(instr)
    else:
        words = shlex.split(instr.args)
    if any(w.startswith("--") for w in words):
        fail(f"{instr}: COPY with flags is not understood in the build stage")
    if len(words) < 2:
        fail(f"{instr}: COPY needs a source and a destination")
    return words[:-1], words[-1]


def image_path(workdir, path):
    """An absolute path in the image, from the current WORKDIR."""
    p = PurePosixPath(workdir) / path
    parts = []
    for part in p.parts[1:]:
        if part == "..":
            fail(f"{path}: `..` in an image path is not understood")
        if part != ".":
            parts.append(part)
    return PurePosixPath("/", *parts)


# ---- the build stage, on a copy ---------------------------------------------------------


def tracked_files():
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached"],
        check=True, capture_output=True,
    ).stdout.decode()
    files = {f for f in out.split("\0") if f}
    # A tracked file deleted from the worktree is not in the copy (a clone would have it).
    return {f for f in files if (REPO / f).is_file() or (REPO / f).is_symlink()}


def copy_into_root(instr, workdir, root, tracked):
    sources, dest = copy_args(instr)
    dest_is_dir = dest.endswith("/") or len(sources) > 1
    dest_path = image_path(workdir, dest)
    copied = 0
    for src in sources:
        if any(c in src for c in "*?[") or "$" in src:
            fail(f"{instr}: wildcards and variables in COPY sources are not understood")
        norm = os.path.normpath(src)
        if norm.startswith("..") or os.path.isabs(norm):
            fail(f"{instr}: {src} is outside the build context")
        if norm == ".":
            fail(f"{instr}: copying the whole context is not understood")
        if norm in tracked:
            # A file: into the destination folder, or as the destination.
            target = dest_path / PurePosixPath(norm).name if dest_is_dir else dest_path
            pairs = [(norm, target)]
        else:
            # A folder: its contents into the destination (Docker's COPY rule).
            under = sorted(f for f in tracked if f.startswith(norm + "/"))
            if not under:
                fail(f"{instr}: {src} is not in the repository's tracked files "
                     "(Docker stops here with \"not found\")")
            pairs = [(f, dest_path / PurePosixPath(f).relative_to(norm)) for f in under]
        for rel, target in pairs:
            host = root / str(target).lstrip("/")
            host.parent.mkdir(parents=True, exist_ok=True)
            src_file = REPO / rel
            if src_file.is_symlink():
                os.symlink(os.readlink(src_file), host)
            else:
                # copyfile, not copy2: the copy's files are newer than any earlier build,
                # so cargo compiles jobstore from them (see step 3 of the docstring).
                shutil.copyfile(src_file, host)
                shutil.copymode(src_file, host)
            copied += 1
    return copied


def cargo_env(build_dir):
    env = {
        k: v for k, v in os.environ.items()
        if not (k.startswith("CARGO_") or k.startswith("RUSTFLAGS") or k == "RUSTC_WRAPPER")
        or k in ("CARGO_HOME",)
    }
    env["CARGO_NET_OFFLINE"] = "true"
    env["CARGO_BUILD_BUILD_DIR"] = str(build_dir)
    env["CARGO_TERM_COLOR"] = "never"
    return env


def run_build_command(instr, cwd, build_dir):
    words = shlex.split(instr.args) if not instr.args.startswith("[") else exec_form(instr)
    if instr.args.startswith("--"):
        fail(f"{instr}: RUN with flags is not understood in the build stage")
    meta = set("|&;<>()$`\\\"'*?[]{}~")
    if any(set(w) & meta for w in words) or words[:2] != ["cargo", "build"]:
        fail(f"{instr}: only a plain `RUN cargo build ...` is understood in the build stage")
    if "--locked" not in words:
        fail(f"{instr}: the build command must use --locked (the image is built from Cargo.lock)")
    log(f"running `{' '.join(words)}` in the copy (CARGO_NET_OFFLINE=true, "
        f"CARGO_BUILD_BUILD_DIR={build_dir})")
    t0 = time.monotonic()
    started = time.time()
    proc = subprocess.run(words, cwd=cwd, env=cargo_env(build_dir),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stderr.write(proc.stdout)
    if proc.returncode != 0:
        fail(f"{instr}: the build command failed in the copy (exit {proc.returncode})")
    if not re.search(rf"Compiling jobstore v\S+ \({re.escape(str(cwd))}\)", proc.stdout):
        fail("cargo did not compile jobstore from the copy (no `Compiling jobstore ... "
             f"({cwd})` line): the check would prove nothing")
    log(f"the build command took {time.monotonic() - t0:.0f}s")
    return words, started


def check_cargo_config(root):
    for d in [root, *root.parents]:
        for name in ("config", "config.toml"):
            if (d / ".cargo" / name).exists():
                fail(f"{d / '.cargo' / name} would apply to the copy's build, not the image's")


# ---- the runtime stage ------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_of(address, what):
    m = re.fullmatch(r"(?:\[[^\]]*\]|[^:]*):(\d+)", address)
    if not m:
        fail(f"{what}: {address!r} has no port")
    return int(m.group(1))


def debian_codename(image):
    m = re.search(r"(buster|bullseye|bookworm|trixie|forky)", image)
    return m.group(1) if m else None


def check_runtime(stage, build_name, build_root, build_started):
    copies = [i for i in stage["instrs"] if i.keyword == "COPY" and "--from" in i.args]
    if len(copies) != 1:
        fail(f"the last stage should copy one file from the build stage, has {len(copies)} COPY --from")
    words = shlex.split(copies[0].args)
    if len(words) != 3 or words[0] != f"--from={build_name}":
        fail(f"{copies[0]}: expected `COPY --from={build_name} SRC DEST`")
    src, dest = words[1], words[2]
    binary = build_root / src.lstrip("/")
    if not binary.is_file() or binary.stat().st_mtime < build_started - 1:
        fail(f"{copies[0]}: {src} was not produced by the build stage's command ({binary})")
    log(f"{src} exists in the copy, from this build ({binary.stat().st_size // 1024} KiB)")

    by_kw = {}
    for i in stage["instrs"]:
        by_kw.setdefault(i.keyword, []).append(i)
    for kw in ("ENTRYPOINT", "CMD", "HEALTHCHECK", "EXPOSE"):
        if len(by_kw.get(kw, [])) != 1:
            fail(f"the last stage should have one {kw}, has {len(by_kw.get(kw, []))}")
    entrypoint = exec_form(by_kw["ENTRYPOINT"][0])
    cmd = exec_form(by_kw["CMD"][0])
    on_path = PurePosixPath(dest).parent in {PurePosixPath(p) for p in ("/usr/local/bin", "/usr/bin", "/bin")}
    if not (entrypoint and (entrypoint[0] == dest or on_path and entrypoint[0] == PurePosixPath(dest).name)):
        fail(f"{by_kw['ENTRYPOINT'][0]}: does not run the copied binary {dest}")

    env = {}
    for i in by_kw.get("ENV", []):
        words = shlex.split(i.args)
        if all("=" in w for w in words):
            env.update(w.split("=", 1) for w in words)
        else:
            env[words[0]] = " ".join(words[1:])
    workdir = by_kw.get("WORKDIR", [None])[-1]

    # ENTRYPOINT + CMD, and `serve --help`.
    argv = [str(binary)] + entrypoint[1:] + cmd
    for args in (argv, [str(binary), "serve"]):
        out = subprocess.run(args + ["--help"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or "--listen" not in out.stdout or "--database-url" not in out.stdout:
            fail(f"`{' '.join(args[1:])} --help` does not show serve's help:\n{out.stdout}{out.stderr}")
        help_text = out.stdout
    log(f"ENTRYPOINT + CMD is `{' '.join(entrypoint + cmd)}`; `jobstore serve --help` runs")
    for name in env:
        if name.startswith("JOBSTORE_") and not re.search(rf"\[env: {name}[=\]]", help_text):
            fail(f"ENV {name}: not a variable that `jobstore serve` reads")

    # HEALTHCHECK: on the listen port and EXPOSE, with a tool the stage installs, answering 200.
    hc = by_kw["HEALTHCHECK"][0]
    m = re.search(r"\bCMD\s+(.*)$", hc.args)
    url = m and re.search(r"http://(127\.0\.0\.1|localhost):(\d+)(/\S*)", m.group(1))
    if not url:
        fail(f"{hc}: no http://127.0.0.1:PORT/PATH URL in its command")
    tool = shlex.split(m.group(1))[0]
    installs = " ".join(i.args for i in by_kw.get("RUN", []))
    if not re.search(rf"apt-get install[^&;|]*\s{re.escape(tool)}(\s|$)", installs):
        fail(f"{hc}: {tool} is not installed by the last stage")
    hc_port, path = int(url.group(2)), url.group(3)
    listen = env.get("JOBSTORE_LISTEN")
    if not listen:
        fail("the last stage does not set JOBSTORE_LISTEN (jobstore listens on 127.0.0.1 by default)")
    if listen.split(":")[0] not in ("0.0.0.0", "[::]"):
        fail(f"ENV JOBSTORE_LISTEN={listen}: not reachable from outside the container")
    expose = [int(p.split("/")[0]) for p in by_kw["EXPOSE"][0].args.split()]
    if port_of(listen, "JOBSTORE_LISTEN") != hc_port or hc_port not in expose:
        fail(f"ports disagree: JOBSTORE_LISTEN={listen}, EXPOSE {expose}, HEALTHCHECK {hc_port}")

    port = free_port()
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("JOBSTORE_")}
    run_env.update(env)
    run_env["JOBSTORE_LISTEN"] = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="jobstore-docker-run-") as cwd, \
            open(Path(cwd) / "serve.log", "w+") as logf:
        proc = subprocess.Popen(argv, cwd=cwd, env=run_env, stdout=logf, stderr=subprocess.STDOUT)
        try:
            deadline, status, last = time.monotonic() + 60, None, None
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
                        status = r.status
                        break
                except urllib.error.HTTPError as e:
                    last = f"HTTP {e.code}"
                except OSError as e:
                    last = str(e)
                time.sleep(0.2)
            if status != 200:
                logf.seek(0)
                fail(f"{hc}: {path} did not answer 200 ({last}; exit {proc.poll()}); "
                     f"the server's output:\n{logf.read()}")
            log(f"the health check's {path} answers 200 from `{' '.join(entrypoint + cmd)}` "
                f"(the image's ENV, WORKDIR {workdir.args if workdir else '/'} as an empty folder)")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    rc = proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = proc.wait()
                if rc != 0:
                    fail(f"the server exited {rc} on SIGTERM")


# ---- main -------------------------------------------------------------------------------


def main():
    tracked = tracked_files()
    if ".dockerignore" in tracked:
        fail(".dockerignore is not understood by this check")
    dockerfile = (REPO / "Dockerfile").read_text()
    all_stages = stages(parse_dockerfile(dockerfile))
    runtime = all_stages[-1]
    froms = [i for i in runtime["instrs"] if i.keyword == "COPY" and "--from=" in i.args]
    if not froms:
        fail("the last stage copies nothing from a build stage")
    from_name = re.search(r"--from=(\S+)", froms[0].args).group(1)
    build = next((s for s in all_stages[:-1] if s["name"] == from_name), None)
    if build is None:
        fail(f"{froms[0]}: no earlier stage is named {from_name}")

    codenames = {debian_codename(build["image"]), debian_codename(runtime["image"])}
    if None not in codenames and len(codenames) != 1:
        fail(f"build image {build['image']} and runtime image {runtime['image']} are different "
             "Debian releases: the binary links against the build image's glibc")
    m = re.match(r"rust:(\d+)\.(\d+)", build["image"])
    need = re.search(r'^rust-version\s*=\s*"(\d+)\.(\d+)', (REPO / "Cargo.toml").read_text(), re.M)
    if m and need and tuple(map(int, m.groups())) < tuple(map(int, need.groups())):
        fail(f"{build['from']}: older than the rust-version {'.'.join(need.groups())} of Cargo.toml")

    default_build_dir = os.environ.get("CARGO_BUILD_BUILD_DIR") or os.environ.get("CARGO_TARGET_DIR") or "target"
    build_dir = (REPO / os.environ.get("DOCKER_CHECK_BUILD_DIR", default_build_dir)).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="jobstore-docker-check-")).resolve()
    root = tmp / "root"
    root.mkdir()
    try:
        check_cargo_config(root)
        workdir, copied, build_started, ran = "/", 0, None, False
        for i in build["instrs"]:
            if i.keyword == "WORKDIR":
                workdir = str(image_path(workdir, i.args))
                (root / workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
            elif i.keyword == "COPY":
                if ran:
                    fail(f"{i}: a COPY after the build command is not understood")
                copied += copy_into_root(i, workdir, root, tracked)
            elif i.keyword == "RUN":
                if ran:
                    fail(f"{i}: a second RUN in the build stage is not understood")
                cwd = root / workdir.lstrip("/")
                log(f"copied {copied} tracked files into {workdir} as the COPY lines name them: "
                    f"{', '.join(sorted(os.listdir(cwd)))}")
                _, build_started = run_build_command(i, cwd, build_dir)
                ran = True
            else:
                fail(f"{i}: {i.keyword} is not understood in the build stage")
        if not ran:
            fail("the build stage has no RUN cargo build")
        check_runtime(runtime, from_name, root, build_started)
    finally:
        if os.environ.get("DOCKER_CHECK_KEEP") == "1":
            log(f"kept the copy in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    log("ok: the Dockerfile's build stage builds jobstore from the tracked files it copies, "
        "and its last stage runs it")


if __name__ == "__main__":
    main()
