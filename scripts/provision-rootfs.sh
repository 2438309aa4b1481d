#!/usr/bin/env bash
# Builds, once per machine, a Debian root filesystem holding a database server newer than the host can run
# (MySQL 9.x from sid, MariaDB 11.x from testing: both need a newer C library than Debian 12), so that
# src/backends/rootfs.ts can start it through chroot. A cache entry is used only when its stamp says it is
# complete and was built by this very script: a half-built or older build is rebuilt, never reused.
#
# usage: scripts/provision-rootfs.sh <mysql|mariadb11>             ensure the root filesystem, print its path
#        scripts/provision-rootfs.sh <mysql|mariadb11> --check     print its path if usable, else exit 3
#        scripts/provision-rootfs.sh <mysql|mariadb11> --print-mirror
#
# Environment (all optional):
#   SQLTALLY_ROOTFS_CACHE   cache folder            (default /var/cache/sqltally/rootfs)
#   SQLTALLY_DEBIAN_MIRROR  Debian mirror URL       (default: read from the machine's apt sources)
#   SQLTALLY_APT_DIR        apt configuration folder (default /etc/apt; tests point it at fixtures)
#   SQLTALLY_DEBOOTSTRAP    debootstrap command     (default debootstrap; tests substitute a stub)
#   SQLTALLY_CHROOT         chroot command          (default chroot; tests substitute a stub)
#
# Exit codes: 0 ready, 2 usage, 3 not provisioned (--check), 4 prerequisite missing (root, debootstrap),
#             5 mirror unreachable, 6 debootstrap failed, 7 built but the server binary does not run.
# Messages go to stderr, each naming the backend; stdout carries only the path (or the mirror).
set -euo pipefail
# Everything runs from main(), parsed in full before it starts: editing this file during a long build cannot
# make the running shell read a half-old, half-new script.

readonly STAMP_NAME='.sqltally-rootfs.json'
readonly STAMP_SCHEMA_VERSION=1
readonly DEFAULT_MIRROR='http://deb.debian.org/debian'

main() {
  SCRIPT_PATH="$(readlink -f "${BASH_SOURCE[0]}")"
  NAME="${1:-}"
  MODE="${2:-ensure}"

  case "$NAME" in
    mysql)
      BACKEND='mysql@9.x'
      SUITE='sid'
      PACKAGES='mysql-server-core'
      SERVER_BIN='/usr/sbin/mysqld'
      EXPECT_FLAVOUR='MySQL'
      ;;
    mariadb11)
      BACKEND='mariadb@11.x'
      SUITE='testing'
      PACKAGES='mariadb-server-core'
      SERVER_BIN='/usr/sbin/mariadbd'
      EXPECT_FLAVOUR='MariaDB'
      ;;
    *)
      echo "usage: $0 <mysql|mariadb11> [--check|--print-mirror]" >&2
      exit 2
      ;;
  esac
  case "$MODE" in ensure|--check|--print-mirror) ;; *) echo "usage: $0 $NAME [--check|--print-mirror]" >&2; exit 2 ;; esac

  CACHE="${SQLTALLY_ROOTFS_CACHE:-/var/cache/sqltally/rootfs}"
  APT_DIR="${SQLTALLY_APT_DIR:-/etc/apt}"
  DEBOOTSTRAP="${SQLTALLY_DEBOOTSTRAP:-debootstrap}"
  CHROOT="${SQLTALLY_CHROOT:-chroot}"

  say() { echo "provision-rootfs[$BACKEND]: $*" >&2; }
  fail() { # code, message
    echo "provision-rootfs[$BACKEND]: UNAVAILABLE: $2" >&2
    exit "$1"
  }

  # The hash covers the script itself (suite, package list, post-processing) and the entry name: editing the
  # script makes every older cache entry an "older build". src/backends/rootfs.ts computes the same value.
  inputs_hash() {
    { cat "$SCRIPT_PATH"; printf '\n%s' "$NAME"; } | sha256sum | cut -c1-16
  }

  # The first Debian archive (not -security, not a third-party repository) in the apt sources, in either the
  # one-line format (sources.list, *.list) or deb822 (*.sources). Files renamed to anything else are disabled.
  mirror_from_apt_sources() {
    local files=() f
    [ -f "$APT_DIR/sources.list" ] && files+=("$APT_DIR/sources.list")
    for f in "$APT_DIR"/sources.list.d/*.list "$APT_DIR"/sources.list.d/*.sources; do
      [ -f "$f" ] && files+=("$f")
    done
    [ "${#files[@]}" -gt 0 ] || return 0
    awk '
      function consider(uri, suites,   n, i, parts) {
        if (found) return
        if (uri !~ /^(https?|ftp):\/\//) return
        if (uri ~ /debian-security|security\.debian\.org/) return
        n = split(suites, parts, /[ \t]+/)
        for (i = 1; i <= n; i++) {
          if (parts[i] == "") continue
          if (parts[i] ~ /-security$/) return
          # A Debian archive serves Debian codenames; this excludes vendor repos (nodistro, cloud-sdk-*).
          if (parts[i] ~ /^(bookworm|trixie|forky|duke|bullseye|sid|unstable|testing|stable|oldstable)(-updates|-backports)?$/) {
            sub(/\/+$/, "", uri); print uri; found = 1; return
          }
        }
      }
      function flush_stanza() {
        if (st_types ~ /(^|[ \t])deb([ \t]|$)/ && st_enabled !~ /^[ \t]*no/) {
          n = split(st_uris, us, /[ \t]+/)
          for (i = 1; i <= n; i++) if (us[i] != "") consider(us[i], st_suites)
        }
        st_types = ""; st_uris = ""; st_suites = ""; st_enabled = ""
      }
      FNR == 1 { if (NR > 1) flush_stanza(); deb822 = (FILENAME ~ /\.sources$/) }
      deb822 {
        if ($0 ~ /^[ \t]*#/) next
        if ($0 ~ /^[ \t]*$/) { flush_stanza(); next }
        line = $0
        if (match(line, /^[A-Za-z-]+:/)) {
          key = tolower(substr(line, 1, RLENGTH - 1)); val = substr(line, RLENGTH + 1)
          if (key == "types") st_types = val
          else if (key == "uris") st_uris = val
          else if (key == "suites") st_suites = val
          else if (key == "enabled") st_enabled = val
        }
        next
      }
      {
        sub(/#.*/, "")
        if ($1 != "deb") next
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        consider($i, $(i + 1))
      }
      END { flush_stanza() }
    ' "${files[@]}"
  }

  pick_mirror() {
    if [ -n "${SQLTALLY_DEBIAN_MIRROR:-}" ]; then echo "${SQLTALLY_DEBIAN_MIRROR%/}"; return; fi
    local m
    m="$(mirror_from_apt_sources)"
    echo "${m:-$DEFAULT_MIRROR}"
  }

  if [ "$MODE" = '--print-mirror' ]; then pick_mirror; exit 0; fi

  HASH="$(inputs_hash)"
  FINAL="$CACHE/$NAME-$HASH"

  # Complete means: the stamp exists, parses to our schema, names this entry and this script's hash.
  stamp_ok() { # dir
    local stamp="$1/$STAMP_NAME"
    [ -f "$stamp" ] || return 1
    grep -q "\"schemaVersion\": *$STAMP_SCHEMA_VERSION[,} ]" "$stamp" || return 1
    grep -q "\"name\": *\"$NAME\"" "$stamp" || return 1
    grep -q "\"inputsHash\": *\"$HASH\"" "$stamp" || return 1
    grep -q '"complete": *true' "$stamp" || return 1
    [ -x "$1$SERVER_BIN" ] || return 1
  }

  if [ "$MODE" = '--check' ]; then
    if stamp_ok "$FINAL"; then echo "$FINAL"; exit 0; fi
    say "not provisioned (no complete build at $FINAL); run scripts/provision-rootfs.sh $NAME"
    exit 3
  fi

  # Removing a tree that debootstrap may have left /proc or /sys mounted in must unmount first, or rm would
  # wander into the host's pseudo-filesystems.
  remove_tree() { # dir
    local dir="$1" mp
    [ -e "$dir" ] || return 0
    while read -r mp; do
      umount -l "$mp" 2>/dev/null || true
    done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r)
    rm -rf --one-file-system -- "$dir"
  }

  mkdir -p "$CACHE" || fail 4 "cannot create the cache folder $CACHE"
  [ -w "$CACHE" ] || fail 4 "the cache folder $CACHE is not writable (run as root or set SQLTALLY_ROOTFS_CACHE)"

  # One builder per entry at a time; a second caller waits and then finds the finished build.
  exec 9>"$CACHE/.lock-$NAME"
  flock 9

  # Anything else under our name is a half-built temp folder or an older build: neither is ever reused.
  for old in "$CACHE/.building-$NAME-"* "$CACHE/$NAME-"*; do
    [ -e "$old" ] || continue
    [ "$old" = "$FINAL" ] && continue
    say "removing stale entry $old (half-built or older build)"
    remove_tree "$old"
  done

  if stamp_ok "$FINAL"; then
    say "cached: $FINAL"
    echo "$FINAL"
    exit 0
  fi
  if [ -e "$FINAL" ]; then
    say "removing $FINAL: its stamp is missing or does not match this script (hash $HASH)"
    remove_tree "$FINAL"
  fi

  [ "$(id -u)" = 0 ] || fail 4 "building a root filesystem needs root (debootstrap, chroot); run as root"
  command -v "${DEBOOTSTRAP%% *}" >/dev/null 2>&1 ||
    fail 4 "debootstrap is not installed: apt-get install -y debootstrap"

  MIRROR="$(pick_mirror)"
  # Fail fast, and say so, when the mirror is unreachable rather than letting debootstrap time out obscurely.
  if [ -z "${SQLTALLY_SKIP_MIRROR_CHECK:-}" ]; then
    if ! curl -fsS --max-time 20 -o /dev/null "$MIRROR/dists/$SUITE/Release" 2>/tmp/sqltally-mirror-err.$$; then
      err="$(tr '\n' ' ' </tmp/sqltally-mirror-err.$$)"; rm -f /tmp/sqltally-mirror-err.$$
      fail 5 "mirror $MIRROR is unreachable for suite $SUITE ($err); set SQLTALLY_DEBIAN_MIRROR or restore network"
    fi
    rm -f /tmp/sqltally-mirror-err.$$
  fi

  BUILD="$CACHE/.building-$NAME-$HASH-$$"
  trap 'remove_tree "$BUILD"' EXIT
  say "building $SUITE root filesystem with $PACKAGES from $MIRROR into $BUILD"
  started=$(date +%s)
  LOG="$CACHE/.log-$NAME-debootstrap"
  # shellcheck disable=SC2086 # DEBOOTSTRAP may carry arguments in tests
  if ! $DEBOOTSTRAP --variant=minbase --include="$PACKAGES" "$SUITE" "$BUILD" "$MIRROR" >"$LOG" 2>&1; then
    tail -n 15 "$LOG" >&2 || true
    fail 6 "debootstrap of $SUITE with $PACKAGES failed (full log: $LOG)"
  fi

  [ -x "$BUILD$SERVER_BIN" ] || fail 7 "debootstrap finished but $SERVER_BIN is missing from the root filesystem"
  VERSION="$($CHROOT "$BUILD" "$SERVER_BIN" --version 2>&1 | head -n 1)" ||
    fail 7 "$SERVER_BIN does not run inside the root filesystem: $VERSION"
  # The name proves nothing (Debian's mysqld may be MariaDB's): the binary's own words decide.
  if echo "$VERSION" | grep -qi mariadb; then flavour=MariaDB; else flavour=MySQL; fi
  [ "$flavour" = "$EXPECT_FLAVOUR" ] || fail 7 "$SERVER_BIN reports '$VERSION', which is $flavour, not $EXPECT_FLAVOUR"
  # Downloaded packages are not needed to run the server and double the size of the cache.
  rm -rf "$BUILD/var/cache/apt/archives/"*.deb "$BUILD/var/lib/apt/lists/"* 2>/dev/null || true
  mkdir -p "$BUILD/var/tmp" && chmod 1777 "$BUILD/var/tmp"

  json_escape() { printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'; }
  elapsed=$(( $(date +%s) - started ))
  # The stamp is written last, inside the temp folder, and the folder is renamed in one step: a reader sees
  # either no entry or a complete one.
  cat >"$BUILD/$STAMP_NAME" <<EOF
{"schemaVersion": $STAMP_SCHEMA_VERSION, "name": "$NAME", "inputsHash": "$HASH", "suite": "$SUITE", "packages": "$PACKAGES", "mirror": "$(json_escape "$MIRROR")", "serverBinary": "$SERVER_BIN", "serverVersion": "$(json_escape "$VERSION")", "buildSeconds": $elapsed, "builtAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "complete": true}
EOF
  mv -T "$BUILD" "$FINAL"
  trap - EXIT
  say "ready in ${elapsed}s: $VERSION"
  echo "$FINAL"
}

main "$@"
