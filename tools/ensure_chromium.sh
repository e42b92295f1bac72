#!/usr/bin/env bash
# What the browser tests need: Debian's Chromium, and npm's axe-core for the accessibility
# check, installed when missing.  Chromium needs root or password-less sudo; otherwise this
# says what to run (the browser tests skip without it, except under CI).
set -euo pipefail

ensure_chromium() {
  if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: no chromium and no apt-get; install Chromium yourself (the browser tests skip without it)" >&2
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      echo "ensure_chromium: run 'sudo apt-get install -y chromium' once (the browser tests skip without it)" >&2
      return 0
    fi
  fi
  echo "ensure_chromium: installing Debian's chromium (once)"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q chromium >/dev/null
}

# axe-core lives outside the repository, in the course cache.
ensure_axe() {
  local dir="${COURSE_CACHE:-$HOME/.cache/attention-course}/axe"
  if [ -f "$dir/node_modules/axe-core/axe.min.js" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "ensure_chromium: npm is missing; the accessibility check needs axe-core (install Node.js and npm)" >&2
    return 0
  fi
  echo "ensure_chromium: installing npm's axe-core into $dir (once)"
  mkdir -p "$dir"
  npm install --silent --no-audit --no-fund --prefix "$dir" axe-core@4 >/dev/null
}

ensure_chromium
ensure_axe
