#!/usr/bin/env bash
# Installs Debian's headless browser and its WebDriver for the console's browser test
# (tests/integration/console.rs): `chromium` and `chromium-driver`, only when they are missing.
# Needs root (apt-get); idempotent.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "scripts/console/install.sh: chromium and chromedriver are missing; run this as root" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
command -v chromium >/dev/null && command -v chromedriver >/dev/null
