# shellcheck shell=bash
# Facts the container scripts share, each said once: sourced by containers/setup-apptainer, containers/apptainer and
# containers/build (and read by ardlab.images.rootfs and tests/test_apptainer.py).

# The unprivileged user in Apptainer's root that builds images (--fakeroot needs one: root in this sandbox lacks a
# capability Apptainer asks for); a folder a build writes must be this uid's.
# shellcheck disable=SC2034  # read by the scripts that source this file
ARDLAB_BUILD_USER=ardlab
# shellcheck disable=SC2034
ARDLAB_BUILD_UID=2000

# The Debian mirror apt already uses on this machine (its deb822 URIs line), else Debian's default.
debian_mirror() {
  local m
  m=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  echo "${m:-http://deb.debian.org/debian}"
}

# Where containers/setup-apptainer keeps Apptainer's root, keyed by what makes it (that script and this file).
# $1: the containers folder.
apptainer_dir() {
  local key
  key=$(cat "$1/setup-apptainer" "$1/common.sh" | sha256sum | cut -c1-12)
  echo "${ARDLAB_APPTAINER_CACHE:-$(dirname "$1")/.cache/apptainer}/sid-$key"
}
