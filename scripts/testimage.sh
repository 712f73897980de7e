#!/usr/bin/env bash
# Builds the tiny image the runtime tests (and anyone else's Docker tests) run:
# cshare-busybox:latest, a static busybox with its applets linked into /bin.
# No registry is needed: the rootfs is assembled locally and `docker import`ed.
# Idempotent: exits 0 at once when the image already exists.
set -euo pipefail

IMAGE="${CSHARE_TEST_IMAGE:-cshare-busybox:latest}"

if ! command -v docker >/dev/null 2>&1; then
  echo "testimage: the docker CLI is not installed; cannot build $IMAGE" >&2
  exit 1
fi
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  exit 0
fi

busybox=""
for candidate in /bin/busybox /usr/bin/busybox; do
  if [ -x "$candidate" ]; then busybox="$candidate"; break; fi
done
if [ -z "$busybox" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "testimage: /bin/busybox is missing and we are not root; install it with: sudo apt-get install -y busybox-static" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "testimage: /bin/busybox is missing and apt-get is not available; install a static busybox at /bin/busybox" >&2
    exit 1
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y busybox-static >/dev/null 2>&1; then
    # The package lists may be missing on a fresh machine: refresh once and retry.
    if ! { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y busybox-static >/dev/null 2>&1; }; then
      echo "testimage: 'apt-get install -y busybox-static' failed; install a static busybox at /bin/busybox and retry" >&2
      exit 1
    fi
  fi
  busybox=/bin/busybox
fi

# A dynamically linked busybox would not run in an empty rootfs.
if command -v file >/dev/null 2>&1 && file -L "$busybox" | grep -q 'dynamically linked'; then
  echo "testimage: $busybox is dynamically linked; install busybox-static (apt-get install -y busybox-static)" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/rootfs"
mkdir -p "$root/bin" "$root/tmp" "$root/data" "$root/etc" "$root/root" "$root/proc" "$root/sys" "$root/dev"
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for applet in $("$busybox" --list); do
  case "$applet" in
    busybox | */*) continue ;;
  esac
  ln -sf busybox "$root/bin/$applet"
done
# The few applets the tests rely on must be present whatever --list said.
for applet in sh echo cat sleep ls env true false seq wc head tr printf test '[' mkdir rm; do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

tar -C "$root" -cf "$tmp/rootfs.tar" .
docker import \
  --change 'ENV PATH=/bin' \
  --change 'CMD ["/bin/sh"]' \
  "$tmp/rootfs.tar" "$IMAGE" >/dev/null
echo "testimage: built $IMAGE"
