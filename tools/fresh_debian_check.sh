#!/usr/bin/env bash
# tools/fresh_debian_check.sh [--keep] [--mirror URL] [--dir PARENT]
#
# Proves the README's test command on a bare Debian 12: debootstraps a minimal bookworm root
# (`--variant=minbase`, none of this machine's packages), copies a clean checkout of HEAD into it
# (`git archive`, so no build folder, no uncommitted change and no ../shared beside it), chroots
# and runs the README's second Quick start command verbatim, then prints the wall times and the
# result. The exit status is that of the command (or 1 when the root cannot be made).
#
# Needs root, `debootstrap` (Debian package debootstrap) and network access to the Debian mirror.
# The mirror is the one apt uses on this machine (the first bookworm entry under /etc/apt),
# unless --mirror names another. The root lives in a temporary directory under PARENT (default
# /var/tmp); it is unmounted and deleted on exit, failure or Ctrl-C. --keep keeps the (unmounted)
# root for inspection and prints its path.
set -uo pipefail

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

keep=false
mirror=""
parent=/var/tmp
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=true ;;
    --mirror) [ $# -ge 2 ] || { echo "fresh_debian_check.sh: --mirror needs a URL" >&2; exit 2; }
              mirror=$2; shift ;;
    --dir) [ $# -ge 2 ] || { echo "fresh_debian_check.sh: --dir needs a directory" >&2; exit 2; }
           parent=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fresh_debian_check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "fresh_debian_check: $*" >&2; }

[ "$(id -u)" -eq 0 ] || { say "must run as root (debootstrap, mount and chroot need it)"; exit 2; }
command -v debootstrap >/dev/null 2>&1 ||
  { say "debootstrap not found; install the Debian package: apt-get install debootstrap"; exit 2; }
[ -d "$parent" ] || { say "--dir $parent: no such directory"; exit 2; }

repo=$(cd "$(dirname "$0")/.." && git rev-parse --show-toplevel 2>/dev/null) ||
  { say "$(dirname "$0")/..: not a git checkout (the check copies HEAD with git archive)"; exit 2; }

# The README's Quick start commands, as the project's checks read them: the non-empty,
# non-comment lines inside the code fences of the first section whose heading says "quick",
# with a leading '$ ' or 'sudo ' removed. The second one is the test command.
readme_test_command() {
  awk '
    /^[[:space:]]*```/ && inside { fence = !fence; next }
    !fence && /^#+[[:space:]]/ { if (inside) exit; inside = (tolower($0) ~ /quick/); next }
    inside && fence && $0 ~ /[^[:space:]]/ && $0 !~ /^[[:space:]]*#/ {
      sub(/^[[:space:]]*(\$[[:space:]]+)?(sudo[[:space:]]+)?/, ""); n++
      if (n == 2) { print; exit }
    }' "$1"
}
test_cmd=$(readme_test_command "$repo/README.md")
[ -n "$test_cmd" ] || { say "$repo/README.md: no second command in the Quick start code block"; exit 2; }

# The mirror apt uses here: the URI of the first entry for suite bookworm, in either the
# one-line (sources.list) or the deb822 (*.sources) format.
host_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      /^[[:space:]]*deb[[:space:]]/ {
        for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i !~ /=/) break
        if ($(i + 1) == "bookworm") { print $i; exit }
      }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") found = 1 }
      /^[[:space:]]*$/ { if (found && uri != "") { print uri; exit } uri = ""; found = 0 }
      END { if (found && uri != "") print uri }' "$f" | head -n 1 | grep . && return 0
  done
  return 1
}
[ -n "$mirror" ] || mirror=$(host_mirror) ||
  { say "no bookworm entry under /etc/apt to take the mirror from; pass --mirror URL"; exit 2; }

if [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]; then
  say "note: the checkout has uncommitted changes; the check uses HEAD ($(git -C "$repo" rev-parse --short HEAD)) without them"
fi

tmp=$(mktemp -d "$parent/monarch-fresh.XXXXXX") || { say "cannot make a directory under $parent"; exit 1; }
root=$tmp/root
bootstrap_group=""

# Every process whose root directory is the chroot, so that none is left running (and none
# holds a mount) when the root goes away.
chroot_pids() {
  find /proc/[0-9]*/root -maxdepth 0 \( -lname "$root" -o -lname "$root/*" \) 2>/dev/null |
    sed 's|^/proc/\([0-9]*\)/root$|\1|'
}

root_mounts() {
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts
}

cleanup() {
  trap - EXIT INT TERM HUP
  local pids i m
  if [ -n "$bootstrap_group" ] && kill -TERM -- "-$bootstrap_group" 2>/dev/null; then
    say "stopping debootstrap"
    for i in $(seq 1 20); do
      kill -0 -- "-$bootstrap_group" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$bootstrap_group" 2>/dev/null
  fi
  pids=$(chroot_pids)
  if [ -n "$pids" ]; then
    say "stopping the processes still running in the root"
    kill -TERM $pids 2>/dev/null
    for i in $(seq 1 20); do
      pids=$(chroot_pids); [ -z "$pids" ] && break
      sleep 0.5
    done
    pids=$(chroot_pids); [ -n "$pids" ] && kill -KILL $pids 2>/dev/null && sleep 1
  fi
  # Ours and any debootstrap left behind when interrupted, the deepest first.
  for m in $(root_mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  if [ -n "$(root_mounts)" ]; then
    say "something is still mounted under $root; leaving $tmp in place (unmount it, then delete it)"
  elif $keep; then
    say "kept the root (unmounted): $root"
  else
    rm -rf --one-file-system "$tmp"
  fi
}
trap cleanup EXIT
trap 'say "interrupted after ${SECONDS} s"; exit 130' INT
trap 'say "terminated after ${SECONDS} s"; exit 143' TERM HUP

mount_in_root() {  # mount_in_root TARGET MOUNT-ARGS...; cleanup unmounts it
  local target=$root$1; shift
  mkdir -p "$target"
  mount "$@" "$target" || { say "mount $* $target failed"; exit 1; }
}

start_s=$(date +%s)
say "debootstrap --variant=minbase bookworm $root $mirror"
# Long commands run in the background and are waited for, so that the INT/TERM traps run at
# once. debootstrap gets a process group of its own, which cleanup stops as a whole.
setsid debootstrap --variant=minbase bookworm "$root" "$mirror" >"$tmp/debootstrap.log" 2>&1 &
bootstrap_group=$!
if ! wait "$bootstrap_group"; then
  tail -n 30 "$tmp/debootstrap.log" >&2
  say "debootstrap failed (log above)"
  exit 1
fi
bootstrap_group=""
bootstrap_s=$(( $(date +%s) - start_s ))
say "debootstrap took ${bootstrap_s} s; root holds $(chroot "$root" dpkg-query -W -f='.\n' | wc -l) packages"

# What a fresh Debian 12 install has: the release, its updates and its security archive.
cat >"$root/etc/apt/sources.list" <<EOT
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOT
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

mkdir -p "$root/src/monarch-sim"
# The commit copied, fixed now: HEAD may move while the check runs.
commit=$(git -C "$repo" rev-parse --short HEAD)
git -C "$repo" archive --format=tar "$commit" | tar -x -C "$root/src/monarch-sim" ||
  { say "git archive HEAD failed"; exit 1; }
say "copied HEAD $commit to /src/monarch-sim (nothing beside it)"

mount_in_root /proc -t proc proc
mount_in_root /sys -t sysfs sysfs
mount_in_root /dev --rbind /dev
mount --make-rslave "$root/dev"

say "running the README's test command in the root:"
echo "  $test_cmd" >&2
cmd_start_s=$(date +%s)
# A clean environment, as a login on the new machine would have. --default-signal undoes the
# SIGINT ignore a non-interactive shell gives background jobs, so Ctrl-C still reaches the
# command.
env -i --default-signal=INT,QUIT PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
  chroot "$root" /bin/bash -c 'cd /src/monarch-sim && eval "$1"' bash "$test_cmd" &
child=$!
wait "$child"
rc=$?
cmd_s=$(( $(date +%s) - cmd_start_s ))
total_s=$(( $(date +%s) - start_s ))

echo
echo "fresh Debian 12 check of $commit on $(nproc) cores, mirror $mirror"
echo "  command:   $test_cmd"
echo "  wall time: ${cmd_s} s for the command, ${bootstrap_s} s for debootstrap, ${total_s} s in all"
if [ "$rc" -eq 0 ]; then
  echo "  result:    PASS"
else
  echo "  result:    FAIL (exit status $rc)"
fi
exit "$rc"
