#!/usr/bin/env bash
# Idempotent, cached set-up of the development environment in .venv:
#   1. checks the prerequisites (Python 3.10-3.12 on x86_64, C/C++ compiler,
#      cmake, make) and fails at once with one line naming what is missing;
#   2. creates .venv and installs the ROS 2 Kilted wheels + Python deps
#      (skipped when requirements/*.txt are unchanged: no network work);
#   3. repairs the wheels' CMake include paths (tools/fix_ros_wheels.py);
#   4. builds tf2_msgs/TFMessage, control_msgs' FollowJointTrajectory and
#      controller_manager_msgs' SwitchController from their upstream
#      definitions if absent;
#   5. generates msg/ with rosidl against the wheels (when msg/ changed);
#   6. installs this package editable;
#   7. installs the Debian packages the tests need (mona, chromium, Cyclone
#      DDS with its security plugins, Node.js) when running as root, else
#      names them in one line;
#   8. installs the Foxglove WebSocket client (npm) the Foxglove test drives.
# Each step writes a stamp under .venv/.stamps; a failed step writes none,
# so a re-run after fixing the cause completes the set-up.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${SAFEMANIP_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
STAMPS=$VENV/.stamps
BUILD=$ROOT/build/venv
QUIET=${SAFEMANIP_SETUP_QUIET:-}

say() { [ -n "$QUIET" ] || echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; echo "$2" > "$STAMPS/$1"; }

# ---------------------------------------------------------------- 1. checks
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: install Python 3.10-3.12 (e.g. apt-get install python3 python3-venv)"
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$pyver" in 3.10|3.11|3.12) ;; *) die "Python $pyver found; the ROS 2 wheels need CPython 3.10-3.12 (set PYTHON=python3.11)";; esac
[ "$(uname -m)" = x86_64 ] || die "$(uname -m) machine: the ROS 2 PyPI wheels exist for x86_64 Linux only; build on a ROS 2 distro with colcon instead"
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || die "no C compiler: install one (apt-get install build-essential)"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "no C++ compiler: install one (apt-get install build-essential)"
command -v cmake >/dev/null 2>&1 || die "cmake not found: install it (apt-get install cmake, or pip install cmake)"
command -v make >/dev/null 2>&1 || die "make not found: install it (apt-get install make)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || die "Python venv/ensurepip missing: install it (apt-get install python${pyver}-venv)"

# ------------------------------------------------------------------ 2. venv
if [ ! -x "$VENV/bin/python" ] || [ "$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" != "$pyver" ]; then
  say "creating $VENV (Python $pyver)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY=$VENV/bin/python

reqs_hash=$(hash_of "$ROOT/requirements/ros.txt" "$ROOT/requirements/dev.txt")
if ! stamp_ok requirements "$reqs_hash"; then
  # Probe the index first so an offline machine fails in seconds, in one line.
  if ! "$PY" -m pip index versions ros-rclpy --timeout 15 --retries 1 >/dev/null 2>&1; then
    die "cannot reach the Python package index (pip index versions ros-rclpy failed): connect to the network or configure pip's index/proxy, then re-run"
  fi
  say "installing ROS 2 wheels and Python dependencies (about 1 minute, 700 MB)"
  if ! "$PY" -m pip install --disable-pip-version-check -q -r "$ROOT/requirements/ros.txt" \
        -r "$ROOT/requirements/dev.txt" >"$VENV/pip-install.log" 2>&1; then
    grep -v 'is ignored: it is neither' "$VENV/pip-install.log" | tail -n 20 >&2
    die "pip install of requirements/ros.txt and requirements/dev.txt failed; full log in $VENV/pip-install.log"
  fi
  stamp_set requirements "$reqs_hash"
fi

# ------------------------------------------------- 2b. physics simulation
sim_hash=$(hash_of "$ROOT/requirements/sim.txt" "$ROOT/requirements/sim-nodeps.txt")
if ! stamp_ok sim "$sim_hash"; then
  say "installing robosuite + MuJoCo for the physics demo and tests (about 1 minute, 600 MB)"
  if ! { "$PY" -m pip install --disable-pip-version-check -q -r "$ROOT/requirements/sim.txt" \
         && "$PY" -m pip install --disable-pip-version-check -q --no-deps -r "$ROOT/requirements/sim-nodeps.txt"; } \
        >"$VENV/pip-sim.log" 2>&1; then
    grep -v 'is ignored: it is neither' "$VENV/pip-sim.log" | tail -n 20 >&2
    die "pip install of requirements/sim.txt failed; full log in $VENV/pip-sim.log"
  fi
  stamp_set sim "$sim_hash"
fi

# ------------------------------------ 2c. the oldest rosbags we support
# The bag tests also run against the oldest rosbags of the pinned range
# (test/test_bag_compat.py), from this folder put ahead on PYTHONPATH.
oldest=$("$PY" -c 'import ast,sys; t=open(sys.argv[1]).read(); print(t.split("OLDEST = ")[1].split(chr(10))[0].strip(chr(39)))' "$ROOT/safemanip_ros/bag/compat.py")
if ! stamp_ok rosbags-oldest "$oldest" || [ ! -d "$VENV/rosbags-oldest/rosbags" ]; then
  say "installing rosbags $oldest beside the newest (bag tests at both ends of the supported range)"
  rm -rf "$VENV/rosbags-oldest"
  "$PY" -m pip install --disable-pip-version-check -q --no-deps --target "$VENV/rosbags-oldest" \
      "rosbags==$oldest" zstandard >"$VENV/pip-rosbags-oldest.log" 2>&1 \
    || { tail -n 20 "$VENV/pip-rosbags-oldest.log" >&2; die "pip install of rosbags==$oldest failed; log in $VENV/pip-rosbags-oldest.log"; }
  stamp_set rosbags-oldest "$oldest"
fi

# ------------------------------------------------------- 3. repair wheels
"$PY" "$ROOT/tools/fix_ros_wheels.py" "$VENV" >/dev/null

cmake_build() {  # cmake_build SOURCE_DIR BUILD_DIR [extra cmake args...]
  local src=$1 bld=$2; shift 2
  rm -rf "$bld"; mkdir -p "$bld"
  if ! (cd "$bld" && PATH="$VENV/bin:$PATH" AMENT_PREFIX_PATH="$VENV" \
        cmake "$src" -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$VENV" \
          -DPython3_EXECUTABLE="$PY" -DBUILD_TESTING=OFF "$@" >cmake.log 2>&1 \
        && make -j"$(nproc)" >make.log 2>&1 && make install >install.log 2>&1); then
    tail -n 30 "$bld"/*.log >&2
    die "building $(basename "$src") interfaces failed; logs in $bld"
  fi
}

# --------------------------------------------------------------- 4. tf2_msgs
if ! "$PY" -c 'import tf2_msgs.msg' >/dev/null 2>&1; then
  say "building tf2_msgs/TFMessage from its upstream definition (not on PyPI)"
  cmake_build "$ROOT/vendor/tf2_msgs" "$BUILD/tf2_msgs"
fi

# ----------------------------------------------------------- 4b. control_msgs
# FollowJointTrajectory, served by the supervisor tests' controller and the
# simulation bridge (the supervisor itself cancels through action_msgs).
if ! "$PY" -c 'import control_msgs.action' >/dev/null 2>&1; then
  say "building control_msgs/action/FollowJointTrajectory from its upstream definition (not on PyPI)"
  cmake_build "$ROOT/vendor/control_msgs" "$BUILD/control_msgs"
fi

# ------------------------------------------------ 4c. controller_manager_msgs
# SwitchController, which the supervisor's switch_controller action calls.
if ! "$PY" -c 'import controller_manager_msgs.srv' >/dev/null 2>&1; then
  say "building controller_manager_msgs/srv/SwitchController from its upstream definition (not on PyPI)"
  cmake_build "$ROOT/vendor/controller_manager_msgs" "$BUILD/controller_manager_msgs"
fi

# ------------------------------------------------------------ 5. msg/ build
msg_hash=$(hash_of "$ROOT"/msg/*.msg "$ROOT"/srv/*.srv "$ROOT/CMakeLists.txt" "$ROOT/package.xml")
PURELIB=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! stamp_ok interfaces "$msg_hash" || [ ! -f "$PURELIB/safemanip_ros/msg/__init__.py" ] \
     || [ ! -f "$PURELIB/safemanip_ros/srv/__init__.py" ]; then
  say "generating msg/ and srv/ with rosidl (about 30 s)"
  cmake_build "$ROOT" "$BUILD/interfaces" -DSAFEMANIP_INTERFACES_ONLY=ON
  # rosidl installs an empty safemanip_ros/__init__.py into site-packages; removing it
  # lets the editable source package own the name and splice msg/ in (see
  # safemanip_ros/__init__.py).
  # It also registers them as an egg-info distribution named safemanip_ros,
  # which pip would uninstall (deleting msg/) when installing the sources.
  rm -rf "$PURELIB/safemanip_ros/__init__.py" "$PURELIB"/safemanip_ros-*.egg-info
  stamp_set interfaces "$msg_hash"
fi

# -------------------------------------------------------- 6. editable install
pkg_hash=$(hash_of "$ROOT/setup.py" "$ROOT/setup.cfg" "$ROOT/resource/executables.txt")
if ! stamp_ok package "$pkg_hash" || [ ! -x "$VENV/bin/safemanip" ]; then
  say "installing safemanip_ros (editable)"
  "$PY" -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation \
      --config-settings editable_mode=compat -e "$ROOT" >"$VENV/pip-editable.log" 2>&1 \
    || { tail -n 20 "$VENV/pip-editable.log" >&2; die "editable install of $ROOT failed; log in $VENV/pip-editable.log"; }
  stamp_set package "$pkg_hash"
fi

# ---------------------------------------- 7. system packages the tests need
# mona: the reference LTLf compiler (differential tests); chromium: opens the
# audit's report.html headless (report test); Cyclone DDS and Debian's Fast DDS:
# their DDS Security plugins enforce the access-control policy (the PyPI Fast
# DDS has none).
apt_need() {  # apt_need COMMAND-OR-/PATH "PACKAGE..." WHY
  case "$1" in
    /*) [ -e "$1" ] && return 0 ;;
    *) command -v "$1" >/dev/null 2>&1 && return 0 ;;
  esac
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing the Debian package $2 ($3)"
    # shellcheck disable=SC2086  # $2 is a list of packages
    (apt-get install -y -qq $2 >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $2 >/dev/null 2>&1; }) \
      || echo "setup: warning: could not apt-get install $2; the tests that need it ($3) will fail until it is installed" >&2
  else
    echo "setup: note: $3 needs the system package $2: run 'sudo apt-get install $2'" >&2
  fi
}
apt_need mona mona "MONA differential tests"
apt_need chromium chromium "report.html in headless Chromium"
apt_need idlc "cyclonedds-dev cyclonedds-tools" "access-control enforcement tests"
apt_need /usr/include/fastdds/dds/domain/DomainParticipant.hpp libfastrtps-dev "access-control enforcement tests"
apt_need openssl openssl "access-control enforcement tests"
apt_need node "nodejs npm" "the Foxglove client test (a WebSocket client no one here wrote)"

# ---------------------------------------- 8. the Foxglove client the tests use
# Foxglove's own WebSocket client library (@foxglove/ws-protocol, npm) with ws,
# in .venv/foxglove-client: test/helpers/foxglove_client.mjs drives it.
fox_pkgs="@foxglove/ws-protocol@0.8.0 ws@8.18.3"
if command -v npm >/dev/null 2>&1; then
  if ! stamp_ok foxglove-client "$fox_pkgs" || [ ! -d "$VENV/foxglove-client/node_modules/@foxglove/ws-protocol" ]; then
    say "installing the Foxglove WebSocket client ($fox_pkgs) into $VENV/foxglove-client"
    mkdir -p "$VENV/foxglove-client"
    # shellcheck disable=SC2086  # a list of packages
    if (cd "$VENV/foxglove-client" && npm install --no-audit --no-fund --silent --prefix . $fox_pkgs \
          >"$VENV/npm-foxglove.log" 2>&1); then
      stamp_set foxglove-client "$fox_pkgs"
    else
      echo "setup: warning: npm install of $fox_pkgs failed (log: $VENV/npm-foxglove.log); the Foxglove client test will fail" >&2
    fi
  fi
fi

# Final check: the environment imports what the tests need.
"$PY" -c 'import rclpy, safemanip_ros.msg, safemanip_ros.srv, tf2_msgs.msg, controller_manager_msgs.srv, sensor_msgs.msg, rosbags, numpy' \
  || die "the environment in $VENV does not import rclpy/safemanip_ros.msg; remove $VENV/.stamps and re-run"
say "environment ready in $VENV"
