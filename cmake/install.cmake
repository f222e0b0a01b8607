# What `cmake --install` lays out: the daemon and its tool, the example
# handlers, the SDK handler authors build against (header, pkg-config file,
# CMake package), the systemd unit and the example configs.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# lib/, not GNUInstallDirs' lib/<triplet> (Debian, prefix /usr): the handler
# directory is named in configs and docs, so it is one path whatever the
# prefix; pkg-config and find_package search <prefix>/lib too, and systemd
# looks for units in <prefix>/lib/systemd/system, never in a multiarch dir.
set(DEDUPD_LIBDIR lib)
set(DEDUPD_HANDLER_DIR ${DEDUPD_LIBDIR}/dedupd)
set(DEDUPD_SYSTEMD_UNIT_DIR ${DEDUPD_LIBDIR}/systemd/system CACHE STRING "Where the systemd unit goes, relative to the prefix")
set(DEDUPD_CMAKE_DIR ${DEDUPD_LIBDIR}/cmake/dedupd)

# The ABI the header declares, read from the header: one place says it.
file(STRINGS include/dedupd/handler.h _abi REGEX "^#define DEDUPD_HANDLER_ABI_MAJOR [0-9]+$")
string(REGEX REPLACE ".* " "" DEDUPD_HANDLER_ABI_MAJOR "${_abi}")

install(TARGETS dedupd dedupctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS transfer sql filesink hello LIBRARY DESTINATION ${DEDUPD_HANDLER_DIR})
# The hello handler's source: the example the handler guide starts from.
install(FILES handlers/hello/hello.c DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(FILES include/dedupd/handler.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dedupd)

# dedupd::handler: the header and libpq, nothing to link of dedupd's own.
add_library(dedupd_handler INTERFACE)
add_library(dedupd::handler ALIAS dedupd_handler)
set_target_properties(dedupd_handler PROPERTIES EXPORT_NAME handler)
target_include_directories(dedupd_handler INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# Installed, libpq comes from CMake's own FindPostgreSQL (dedupdConfig.cmake finds it).
target_link_libraries(dedupd_handler INTERFACE
  $<BUILD_INTERFACE:PkgConfig::LIBPQ> $<INSTALL_INTERFACE:PostgreSQL::PostgreSQL>)
install(TARGETS dedupd_handler EXPORT dedupdTargets)
install(EXPORT dedupdTargets NAMESPACE dedupd:: DESTINATION ${DEDUPD_CMAKE_DIR})
configure_package_config_file(cmake/dedupdConfig.cmake.in ${CMAKE_BINARY_DIR}/dedupdConfig.cmake
  INSTALL_DESTINATION ${DEDUPD_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR DEDUPD_HANDLER_DIR)
# 0.x: every 0.y satisfies find_package(dedupd 0.1); the ABI major is checked by dedupd at load.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/dedupdConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/dedupdConfig.cmake ${CMAKE_BINARY_DIR}/dedupdConfigVersion.cmake
  DESTINATION ${DEDUPD_CMAKE_DIR})

configure_file(cmake/dedupd-handler.pc.in ${CMAKE_BINARY_DIR}/dedupd-handler.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/dedupd-handler.pc DESTINATION ${DEDUPD_LIBDIR}/pkgconfig)

# The unit and the example configs name the prefix: written when installing,
# for the prefix of that install (cmake --install --prefix X), by
# install_prefixed.cmake. The example configs go to the documentation, not
# /etc: an install must never overwrite an operator's config.
install(CODE "
set(DEDUPD_I_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
set(DEDUPD_I_BINARY_DIR \"${CMAKE_BINARY_DIR}\")
set(DEDUPD_I_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(DEDUPD_I_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
set(DEDUPD_I_HANDLER_DIR \"${DEDUPD_HANDLER_DIR}\")
set(DEDUPD_I_UNIT_DIR \"${DEDUPD_SYSTEMD_UNIT_DIR}\")
")
install(SCRIPT cmake/install_prefixed.cmake)
