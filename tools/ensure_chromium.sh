#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests when it is missing (the only system package
# the course needs).  Needs root or password-less sudo; otherwise says what to run.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_chromium: no chromium and no apt-get; install Chromium yourself (the browser tests skip without it)" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "ensure_chromium: run 'sudo apt-get install -y chromium' once (the browser tests skip without it)" >&2
    exit 0
  fi
fi
echo "ensure_chromium: installing Debian's chromium (once)"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium >/dev/null
