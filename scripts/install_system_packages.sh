#!/usr/bin/env bash
# Debian packages the slow tests start as real services, installed only when absent:
#   postgresql: the database behind the shared `mlflow server` of the remote-sweep tests;
#   chromium: the browser the UI test drives through Playwright (no browser download).
set -euo pipefail
missing=()
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
if ! command -v chromium >/dev/null 2>&1; then
  missing+=(chromium)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install_system_packages: need root to apt-get install ${missing[*]}" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
