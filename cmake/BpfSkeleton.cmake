# Rules that turn probes/<name>/<name>.bpf.c into a BPF object (clang -target bpf, CO-RE) and a
# skeleton header (bpftool gen skeleton).
#
# vmlinux.h: by default the vendored, xz-compressed header in probes/bpf/vmlinux/<arch>/ is used,
# so the build is reproducible and works on a build host whose kernel has no BTF. CO-RE relocates
# every field access against the running kernel's BTF at load time, so the header's kernel need
# not match the target's. Set -DKPATH_VMLINUX_BTF=/sys/kernel/btf/vmlinux to generate the header
# from a kernel's BTF instead (for an architecture that has no vendored header yet).
#
# Where the vendored headers came from:
#   x86_64/  bpftool btf dump of an x86_64 kernel's BTF (its kernel is not recorded).
#   arm64/   the BTF inside Debian 12's linux-image-6.1.0-57-cloud-arm64-unsigned package (the
#            .BTF section carved out of the raw Image); scripts/arm64-vmlinux-h.sh regenerates it.

find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(XZ NAMES xz)

set(KPATH_VMLINUX_BTF "" CACHE FILEPATH "Generate vmlinux.h from this BTF file instead of using the vendored one")

string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _kpath_arch)
if(_kpath_arch MATCHES "x86_64|amd64")
  set(KPATH_BPF_ARCH x86_64)
  set(KPATH_BPF_TARGET_ARCH x86)
elseif(_kpath_arch MATCHES "aarch64|arm64")
  set(KPATH_BPF_ARCH arm64)
  set(KPATH_BPF_TARGET_ARCH arm64)
else()
  message(FATAL_ERROR "kpathd: unsupported architecture ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(KPATH_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf)
file(MAKE_DIRECTORY ${KPATH_BPF_GEN_DIR})
set(_vendored ${CMAKE_SOURCE_DIR}/probes/bpf/vmlinux/${KPATH_BPF_ARCH}/vmlinux.h.xz)
set(KPATH_VMLINUX_H ${KPATH_BPF_GEN_DIR}/vmlinux.h)

if(KPATH_VMLINUX_BTF)
  set(KPATH_VMLINUX_SOURCE ${KPATH_VMLINUX_BTF})
  add_custom_command(OUTPUT ${KPATH_VMLINUX_H}
    COMMAND ${BPFTOOL} btf dump file ${KPATH_VMLINUX_BTF} format c > ${KPATH_VMLINUX_H}
    DEPENDS ${KPATH_VMLINUX_BTF}
    COMMENT "Generating vmlinux.h from ${KPATH_VMLINUX_BTF}")
elseif(EXISTS ${_vendored})
  if(NOT XZ)
    message(FATAL_ERROR "kpathd: xz is needed to unpack ${_vendored}")
  endif()
  set(KPATH_VMLINUX_SOURCE ${_vendored})
  add_custom_command(OUTPUT ${KPATH_VMLINUX_H}
    COMMAND ${XZ} -dc ${_vendored} > ${KPATH_VMLINUX_H}
    DEPENDS ${_vendored}
    COMMENT "Unpacking vendored vmlinux.h (${KPATH_BPF_ARCH})")
else()
  message(FATAL_ERROR "kpathd: no vendored vmlinux.h for ${KPATH_BPF_ARCH}; configure with "
    "-DKPATH_VMLINUX_BTF=/sys/kernel/btf/vmlinux on a host whose kernel has BTF")
endif()
add_custom_target(kpath_vmlinux_h DEPENDS ${KPATH_VMLINUX_H})

# kpath_bpf_skeleton(<name> <source.bpf.c> [NO_GLOBAL_DATA] [DEPENDS headers...])
# Produces ${KPATH_BPF_GEN_DIR}/<name>.skel.h and an INTERFACE target kpath_bpf_<name>. With
# NO_GLOBAL_DATA, also the object's second build for kernels without BPF global data (before
# 5.2; see KPATH_TUNABLE in probes/bpf/kpath_bpf.h), whose bytes <name>.legacy.skel.h embeds
# (<name>_legacy_bpf__elf_bytes), for KPATH_OPEN_SKELETON (probes/collect/bpf_skeleton.h).
function(kpath_bpf_skeleton name src)
  cmake_parse_arguments(ARG "NO_GLOBAL_DATA" "" "DEPENDS" ${ARGN})
  get_filename_component(_src ${src} ABSOLUTE)
  get_filename_component(_srcdir ${_src} DIRECTORY)
  # -Werror stays on here whatever KPATH_WERROR says: BPF code is always compiled by clang
  # -target bpf, the project's own toolchain choice, never by the packager's C++ compiler or
  # build type, so what warns here warns for every build and is a bug in kpathd's BPF code.
  set(_flags -g -O2 -target bpf -D__TARGET_ARCH_${KPATH_BPF_TARGET_ARCH}
    -Wall -Werror -Wno-unused-function
    -I${KPATH_BPF_GEN_DIR} -I${CMAKE_SOURCE_DIR}/probes/bpf -I${_srcdir})
  if(KPATH_BPF_ABLATION)
    list(APPEND _flags -DKPATH_ABLATION=${KPATH_BPF_ABLATION})
  endif()
  # vmlinux.h is made by the kpath_vmlinux_h target (another directory's custom command, which
  # Makefile generators cannot name as a file dependency); its source file stands in for it.
  set(_deps ${_src} ${KPATH_VMLINUX_SOURCE} ${ARG_DEPENDS} ${CMAKE_SOURCE_DIR}/probes/bpf/kpath_bpf.h
                ${CMAKE_SOURCE_DIR}/probes/bpf/kpath_owner.h)
  _kpath_bpf_object(${name} "${_flags}" "${_deps}" ${name}.skel.h ${name}_bpf)
  set(_outputs ${KPATH_BPF_GEN_DIR}/${name}.skel.h)
  if(ARG_NO_GLOBAL_DATA)
    set(_tunables ${KPATH_BPF_GEN_DIR}/${name}.tunables.h)
    add_custom_command(OUTPUT ${_tunables}
      COMMAND ${CMAKE_SOURCE_DIR}/cmake/bpf_tunables.sh ${_tunables} ${BPF_CLANG} ${_flags} ${_src}
      DEPENDS ${_deps} ${CMAKE_SOURCE_DIR}/cmake/bpf_tunables.sh
      COMMENT "BPF ${name}.tunables.h (the build without global data)")
    _kpath_bpf_object(${name}.legacy
      "${_flags};-DKPATH_NO_GLOBAL_DATA;-DKPATH_TUNABLES_NAME=${name}"
      "${_deps};${_tunables}" ${name}.legacy.skel.h ${name}_legacy_bpf)
    list(APPEND _outputs ${KPATH_BPF_GEN_DIR}/${name}.legacy.skel.h)
  endif()
  add_custom_target(kpath_bpf_${name}_gen DEPENDS ${_outputs})
  add_dependencies(kpath_bpf_${name}_gen kpath_vmlinux_h)
  add_library(kpath_bpf_${name} INTERFACE)
  add_dependencies(kpath_bpf_${name} kpath_bpf_${name}_gen)
  target_include_directories(kpath_bpf_${name} INTERFACE ${KPATH_BPF_GEN_DIR})
endfunction()

# One object <stem>.bpf.o from the caller's source (_src) with `flags`, and its skeleton header
# `skel` named `skel_name`.
function(_kpath_bpf_object stem flags deps skel skel_name)
  set(_obj ${KPATH_BPF_GEN_DIR}/${stem}.bpf.o)
  add_custom_command(OUTPUT ${_obj}
    COMMAND ${BPF_CLANG} ${flags} -c ${_src} -o ${_obj}.tmp
    # Strip DWARF but keep BTF: smaller skeletons, same CO-RE information.
    COMMAND ${BPFTOOL} gen object ${_obj} ${_obj}.tmp
    COMMAND ${CMAKE_COMMAND} -E remove ${_obj}.tmp
    DEPENDS ${deps}
    COMMENT "BPF ${stem}.bpf.o")
  add_custom_command(OUTPUT ${KPATH_BPF_GEN_DIR}/${skel}
    COMMAND ${BPFTOOL} gen skeleton ${_obj} name ${skel_name} > ${KPATH_BPF_GEN_DIR}/${skel}
    DEPENDS ${_obj}
    COMMENT "BPF skeleton ${skel}")
endfunction()
