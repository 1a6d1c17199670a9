#!/usr/bin/env bash
# Install Debian packages quietly for a system-deps part (scripts/deps/*.sh), as root:
#   scripts/apt_install.sh NAME PACKAGE...
# Refreshes the package lists only when they are missing (a fresh container has none); keeps the
# packages' postinst from starting services (no init here) with a policy-rc.d that exits 101; logs
# to /tmp/NAME-apt.log and says so in one line when the install fails (exit 1).
set -euo pipefail
name=$1
shift
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show "$1" >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
fi
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
if ! apt-get install -y -qq --no-install-recommends "$@" >"/tmp/$name-apt.log" 2>&1; then
  echo "$name: apt-get install failed (see /tmp/$name-apt.log)" >&2
  exit 1
fi
