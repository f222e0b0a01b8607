# hardening: the flags what users install is built with, as Debian builds its own packages
# (dpkg-buildflags with hardening=+all: -D_FORTIFY_SOURCE=2, -fstack-protector-strong,
# -fstack-clash-protection, -Wl,-z,relro -Wl,-z,now; PIE is Debian's compiler default, and
# hardening-check finds it).
# Not in the sanitizer builds (build-asan/, build-fuzz/): ASan intercepts what fortify would
# check, and they are not what users run. tests/integration/sdk.sh checks the installed files.
option(DEDUPD_HARDENING "Build with Debian's hardening flags (fortify, stack protector, stack clash, full RELRO)" ON)
if(DEDUPD_HARDENING AND NOT DEDUPD_SANITIZE AND NOT DEDUPD_FUZZ)
  include(CheckCCompilerFlag)
  add_compile_options(-fstack-protector-strong)
  # (-fcf-protection is left out: Debian 12's C runtime objects carry no CET note, so the
  # linked program would not either.)
  check_c_compiler_flag(-fstack-clash-protection DEDUPD_HAVE_STACK_CLASH_PROTECTION)
  if(DEDUPD_HAVE_STACK_CLASH_PROTECTION)
    add_compile_options(-fstack-clash-protection)
  endif()
  # Fortify needs the optimiser (glibc warns without it, and -Werror makes that fatal): every
  # build type but Debug. A level the builder chose (CFLAGS from dpkg-buildflags) is kept.
  if(NOT "${CMAKE_C_FLAGS} ${CMAKE_C_FLAGS_${CMAKE_BUILD_TYPE}}" MATCHES "_FORTIFY_SOURCE")
    add_compile_options("$<$<NOT:$<CONFIG:Debug>>:-U_FORTIFY_SOURCE;-D_FORTIFY_SOURCE=2>")
  endif()
  add_link_options(LINKER:-z,relro LINKER:-z,now)
endif()
