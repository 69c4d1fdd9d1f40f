#!/usr/bin/env bash
# What `make browser` runs (`make test` never does). Installs the headless browser the dashboard's
# end-to-end tests drive: Debian's Chromium and its ChromeDriver (/usr/bin/chromium,
# /usr/bin/chromedriver). The Playwright package (a dev extra) only drives it and never downloads
# a browser of its own.
#
# Does nothing when Chromium is already there. Installs only when it can: running as root with
# apt-get available; otherwise it says why and exits 0, and the browser tests skip with that
# reason (or fail under REQUIRE_SERVICES=1, as CI wants).
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install_browser: Chromium is missing; run as root (sudo make browser, or: sudo apt-get install chromium chromium-driver)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser: Chromium is missing and apt-get is not available; install Chromium by hand" >&2
    exit 0
fi

echo "install_browser: installing Debian's chromium, chromium-driver and fonts-liberation" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-liberation >/dev/null
chromium --version >&2 || true
