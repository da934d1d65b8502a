#!/bin/sh
# Installs the S3-compatible server the tests run against (s3rver, pinned by package-lock.json
# next to this script) into DEST: DEST/node_modules/.bin/s3rver. Installs node and npm from
# Debian's packages when either command is missing. Does nothing when DEST already holds this
# lock's install, so `make test` may run it every time.
#
# Usage: install_s3_server.sh DEST
set -eu

if [ $# -ne 1 ]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
dest=$1
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "Installing Debian packages: nodejs npm"
  sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
fi

# The stamp holds the lock it was installed from; the install is current when both match and
# s3rver is there.
stamp=$dest/.installed-package-lock.json
if [ -f "$stamp" ] && [ -e "$dest/node_modules/s3rver/package.json" ] &&
  cmp -s "$stamp" "$here/package-lock.json"; then
  exit 0
fi

echo "Installing s3rver (npm) into $dest"
mkdir -p "$dest"
rm -f "$stamp"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --loglevel=error)
cp "$here/package-lock.json" "$stamp"
