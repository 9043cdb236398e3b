#!/usr/bin/env bash
# Installs planproof's build and test dependencies from Debian 12 packages, only what is
# missing. Non-interactive; safe to run repeatedly. Needs root (or sudo) when something is
# missing.
set -euo pipefail

pkgs=(libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools libz3-dev nlohmann-json3-dev
      catch2 cmake ninja-build g++ make python3 python3-venv python3-dev pybind11-dev libgmp-dev
      libopenblas-serial-dev chromium)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
