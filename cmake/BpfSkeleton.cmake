# Rules that turn probes/<name>/<name>.bpf.c into a BPF object (clang -target bpf, CO-RE) and a
# skeleton header (bpftool gen skeleton).
#
# vmlinux.h: by default the vendored, xz-compressed header in probes/bpf/vmlinux/<arch>/ is used,
# so the build is reproducible and works on a build host whose kernel has no BTF. CO-RE relocates
# every field access against the running kernel's BTF at load time, so the header's kernel need
# not match the target's. Set -DKPATH_VMLINUX_BTF=/sys/kernel/btf/vmlinux to generate the header
# from a kernel's BTF instead (for an architecture that has no vendored header yet).

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

# kpath_bpf_skeleton(<name> <source.bpf.c> [DEPENDS headers...])
# Produces ${KPATH_BPF_GEN_DIR}/<name>.skel.h and an INTERFACE target kpath_bpf_<name>.
function(kpath_bpf_skeleton name src)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  get_filename_component(_src ${src} ABSOLUTE)
  get_filename_component(_srcdir ${_src} DIRECTORY)
  set(_obj ${KPATH_BPF_GEN_DIR}/${name}.bpf.o)
  set(_skel ${KPATH_BPF_GEN_DIR}/${name}.skel.h)
  # -Werror stays on here whatever KPATH_WERROR says: BPF code is always compiled by clang
  # -target bpf, the project's own toolchain choice, never by the packager's C++ compiler or
  # build type, so what warns here warns for every build and is a bug in kpathd's BPF code.
  add_custom_command(OUTPUT ${_obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${KPATH_BPF_TARGET_ARCH}
            -Wall -Werror -Wno-unused-function
            -I${KPATH_BPF_GEN_DIR} -I${CMAKE_SOURCE_DIR}/probes/bpf -I${_srcdir}
            -c ${_src} -o ${_obj}.tmp
    # Strip DWARF but keep BTF: smaller skeletons, same CO-RE information.
    COMMAND ${BPFTOOL} gen object ${_obj} ${_obj}.tmp
    COMMAND ${CMAKE_COMMAND} -E remove ${_obj}.tmp
    # vmlinux.h is made by the kpath_vmlinux_h target (another directory's custom command, which
    # Makefile generators cannot name as a file dependency); its source file stands in for it.
    DEPENDS ${_src} ${KPATH_VMLINUX_SOURCE} ${ARG_DEPENDS}
    COMMENT "BPF ${name}.bpf.c")
  add_custom_command(OUTPUT ${_skel}
    COMMAND ${BPFTOOL} gen skeleton ${_obj} name ${name}_bpf > ${_skel}
    DEPENDS ${_obj}
    COMMENT "BPF skeleton ${name}.skel.h")
  add_custom_target(kpath_bpf_${name}_gen DEPENDS ${_skel})
  add_dependencies(kpath_bpf_${name}_gen kpath_vmlinux_h)
  add_library(kpath_bpf_${name} INTERFACE)
  add_dependencies(kpath_bpf_${name} kpath_bpf_${name}_gen)
  target_include_directories(kpath_bpf_${name} INTERFACE ${KPATH_BPF_GEN_DIR})
endfunction()
