#!/usr/bin/env bash
# Installs every system package wirelat's build and tests need (Debian/Ubuntu, apt-get).
# Idempotent: packages already installed are skipped, and nothing is done if all are there.
#
#   scripts/setup.sh
#
# Packages:
#   libdpdk-dev   DPDK headers, libraries, pkg-config file (dpdk-sys links against it), and
#                 through its dependencies the PMD plugins (net_pcap, net_ring, net_null, ...)
#                 the EAL loads at run time
#   dpdk-dev      dpdk-testpmd, for scripts/bench-forward.sh
#   libclang-dev  libclang for bindgen
#   clang         C compiler matching libclang (the wrapper C files)
#   pkg-config    finds libdpdk
#   libpcap-dev   libpcap for DPDK's pcap virtual device
#   build-essential  cc, ld
#   libhwloc-dev  the machine topology (hwloc 2.x) for the core plan of `wirelat run`
#   libudev-dev   linked by hwloc (hwlocality links it)
#   tcpdump, ethtool, iputils-ping, curl, bind9-dnsutils (dig), dnsmasq-base, iproute2
#                 the kernel-port namespace test (tests/kernel_ports/): captures on both
#                 sides, offloads off, ICMP, TCP, DNS through `wirelat run` on af_packet ports
#   python3       the same test's HTTP server and frame writer (also pulled in by dpdk-dev;
#                 named so that the test does not depend on that)
#   prometheus    tests/prometheus.rs (W16): a real Prometheus scrapes two points and a
#                 collector on 127.0.0.1 and evaluates every query of the Grafana dashboard
#   librsvg2-bin  rsvg-convert, for scripts/dashboard-picture.sh (the README's dashboard PNG;
#                 not needed by the tests)
#   cmake, libnuma-dev  MoonGen's build (../shared/tools/moongen/build.sh), which
#                 tests/moongen.rs runs once into target/moongen (build.sh would install them)
set -euo pipefail

PACKAGES=(libdpdk-dev dpdk-dev libclang-dev clang pkg-config libpcap-dev build-essential libhwloc-dev libudev-dev
          tcpdump ethtool iputils-ping curl bind9-dnsutils dnsmasq-base iproute2 python3 prometheus librsvg2-bin
          cmake libnuma-dev)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "setup: all system packages present (${PACKAGES[*]})"
else
    echo "setup: installing ${missing[*]}"
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found: install a Rust toolchain (rustup.rs) first" >&2
    exit 1
fi
# The test command checks formatting and lints (cargo fmt --check, clippy -D warnings).
if command -v rustup >/dev/null 2>&1; then
    rustup component add clippy rustfmt >/dev/null 2>&1 || true
fi
echo "setup: DPDK $(pkg-config --modversion libdpdk), $(cargo --version)"
