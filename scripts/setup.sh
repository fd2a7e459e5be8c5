#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine (run as root).
# Idempotent: installs only what is missing.
set -euo pipefail
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # wireshark-common asks whether non-root users may capture: answer no, quietly.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
