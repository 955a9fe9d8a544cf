#!/usr/bin/env bash
# Builds the jobstore HA plugin for Apache Flink 2.3 into one jar, with javac and jar only.
#
# Usage: flink-ha-plugin/build.sh
# Env:   FLINK_HOME  Flink 2.3 install to compile against (default: the output of
#                    scripts/flink/install.sh, which installs Flink into <repo>/.flink if needed)
# Stdout: the path of the jar (one line). Logs go to stderr.
# Output: flink-ha-plugin/build/jobstore-flink-ha-plugin-<version>.jar
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
BUILD=$HERE/build
VERSION=$(sed -n 's/.*String VERSION = "\(.*\)";.*/\1/p' \
  "$HERE/src/main/java/io/jobstore/flink/ha/Version.java")
JAR=$BUILD/jobstore-flink-ha-plugin-$VERSION.jar

log() { printf '[flink-ha-plugin] %s\n' "$*" >&2; }

if [ -z "${FLINK_HOME:-}" ]; then
  [ -x "$REPO_ROOT/scripts/flink/install.sh" ] \
    || { log "set FLINK_HOME or provide scripts/flink/install.sh"; exit 1; }
  FLINK_HOME=$("$REPO_ROOT/scripts/flink/install.sh")
fi
ls "$FLINK_HOME"/lib/flink-dist*.jar >/dev/null 2>&1 \
  || { log "no lib/flink-dist*.jar under FLINK_HOME=$FLINK_HOME"; exit 1; }
command -v javac >/dev/null 2>&1 || { log "javac not found (a JDK 11+ is needed)"; exit 1; }

mkdir -p "$BUILD"
work=$(mktemp -d "$BUILD/tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes"
find "$HERE/src/main/java" -name '*.java' | sort >"$work/sources.txt"
log "compiling $(wc -l <"$work/sources.txt") source files against $FLINK_HOME/lib"
# --release 11: Flink 2.x runs on Java 11, 17 and 21.
javac --release 11 -encoding UTF-8 -Xlint:all,-options,-serial,-processing,-try -Werror \
  -cp "$FLINK_HOME/lib/*" -d "$work/classes" "@$work/sources.txt" >&2

mkdir -p "$work/META-INF"
cat >"$work/MANIFEST.MF" <<MF
Implementation-Title: jobstore-flink-ha-plugin
Implementation-Version: $VERSION
Built-Against-Flink: $(basename "$(ls "$FLINK_HOME"/lib/flink-dist*.jar | head -n 1)" .jar)
MF
jar --create --file "$work/plugin.jar" --manifest "$work/MANIFEST.MF" -C "$work/classes" . >&2
mv -f "$work/plugin.jar" "$JAR"
log "built $JAR"
printf '%s\n' "$JAR"
