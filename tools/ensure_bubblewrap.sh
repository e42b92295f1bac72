#!/usr/bin/env bash
# The grading sandbox (course_utils/grading/sandbox.py) needs Debian's bubblewrap; installed when
# missing.  Needs root or password-less sudo; otherwise says what to run (the hostile-submission
# tests skip without it, and the other grading tests grade without the sandbox; under CI they fail).
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_bubblewrap: no bwrap and no apt-get; install bubblewrap yourself (the grading sandbox needs it)" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "ensure_bubblewrap: run 'sudo apt-get install -y bubblewrap' once (the grading sandbox needs it)" >&2
    exit 0
  fi
fi
echo "ensure_bubblewrap: installing Debian's bubblewrap (once)"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q bubblewrap >/dev/null
