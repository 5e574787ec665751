# Cross-compiling kpathd for arm64 (aarch64) on a Debian 12 amd64 host: Debian's cross gcc/g++ 12
# (g++-aarch64-linux-gnu, whose C library and libstdc++ are in /usr/aarch64-linux-gnu) against a
# sysroot of extracted Debian 12 :arm64 packages (the libraries and headers kpathd uses).
# scripts/build-arm64.sh makes the sysroot and passes it as KPATH_ARM64_SYSROOT.
#
# Why a sysroot of extracted packages and not `apt-get install foo-dev:arm64`: several of
# kpathd's -dev packages are not co-installable with their amd64 versions (libyaml-cpp-dev has no
# Multi-Arch field; prometheus-cpp-dev pulls the civetweb tool package), so installing them would
# remove the host's own build dependencies.
#
# Why not CMAKE_SYSROOT: the sysroot holds no C library (the cross toolchain brings its own, the
# same glibc 2.36), so gcc's --sysroot would lose crt1.o and libc; the sysroot is searched with
# -isystem, -L and -rpath-link instead.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT KPATH_ARM64_SYSROOT)
  set(KPATH_ARM64_SYSROOT "$ENV{KPATH_ARM64_SYSROOT}")
endif()
if(NOT KPATH_ARM64_SYSROOT OR NOT IS_DIRECTORY "${KPATH_ARM64_SYSROOT}/usr/include")
  message(FATAL_ERROR "toolchain-aarch64: KPATH_ARM64_SYSROOT (\"${KPATH_ARM64_SYSROOT}\") is not "
    "a sysroot of extracted arm64 packages: run scripts/build-arm64.sh")
endif()
# try_compile projects see the same toolchain file: hand them the sysroot too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KPATH_ARM64_SYSROOT)
set(_sysroot "${KPATH_ARM64_SYSROOT}")
set(_multiarch aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${_multiarch}-gcc)
set(CMAKE_CXX_COMPILER ${_multiarch}-g++)

# /usr/aarch64-linux-gnu: the cross C library, which civetweb's FindLibDl looks for.
set(CMAKE_FIND_ROOT_PATH "${_sysroot}" /usr/${_multiarch})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER) # clang, bpftool, xz run on the build host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(_include "-isystem ${_sysroot}/usr/include/${_multiarch} -isystem ${_sysroot}/usr/include")
set(CMAKE_C_FLAGS_INIT "${_include}")
set(CMAKE_CXX_FLAGS_INIT "${_include}")
set(_link "-L${_sysroot}/usr/lib/${_multiarch} -L${_sysroot}/lib/${_multiarch} \
-Wl,-rpath-link,${_sysroot}/usr/lib/${_multiarch}:${_sysroot}/lib/${_multiarch}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${_link}")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${_link}")

# pkg-config (libbpf): only the sysroot's .pc files, their paths prefixed with the sysroot.
set(ENV{PKG_CONFIG_LIBDIR} "${_sysroot}/usr/lib/${_multiarch}/pkgconfig:${_sysroot}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_sysroot}")
set(ENV{PKG_CONFIG_PATH} "")
