#!/usr/bin/env bash
# An OpenCL CPU device that can compile, on any host of this kind (issue 28).
#
# PyPI's only PoCL (pocl-binary-distribution 3.0, LLVM 14, pulled in by pyopencl[pocl]) cannot compile for
# CPUs newer than LLVM 14 (AMD family 26: "unknown target CPU 'generic'"). Debian's pocl-opencl-icd (PoCL 3.1,
# LLVM 15) can, so on a Debian host where we are root it is installed beside it; adaptune prefers the newest
# PoCL that can build and skips a device that cannot (`adaptune devices` shows each one's state). Where we are
# not root and nothing can compile, stop with one line that names the command to run.
set -u
ADAPTUNE=${1:?usage: ensure_opencl.sh PATH/TO/adaptune}

if [ ! -e /etc/OpenCL/vendors/pocl.icd ] && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing Debian's PoCL (pocl-opencl-icd) beside PyPI's, for CPUs newer than its LLVM 14"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd; } >/dev/null \
      || echo "warning: apt-get install pocl-opencl-icd failed; checking what the host has"
  fi
fi

if ! out=$("$ADAPTUNE" devices --check 2>&1 >/dev/null); then
  echo "$out" >&2
  [ "$(id -u)" = 0 ] || echo "as root, run: apt-get update && apt-get install -y pocl-opencl-icd" >&2
  exit 1
fi
