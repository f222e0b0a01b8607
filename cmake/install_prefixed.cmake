# Run by `cmake --install` (install(SCRIPT)), not at configure time: the files
# that name the prefix — the systemd unit and the example configs — are written
# for the prefix of this install, so `cmake --install build --prefix X` gets X
# even when the build was configured for another. install.cmake sets the
# DEDUPD_I_* paths (relative to the prefix) before this runs.
set(_p "${CMAKE_INSTALL_PREFIX}")
set(CMAKE_INSTALL_FULL_BINDIR "${_p}/${DEDUPD_I_BINDIR}")
set(CMAKE_INSTALL_FULL_DOCDIR "${_p}/${DEDUPD_I_DOCDIR}")
set(DEDUPD_HANDLER_FULL_DIR "${_p}/${DEDUPD_I_HANDLER_DIR}")
set(DEDUPD_SYSTEMD_UNIT_DIR "${DEDUPD_I_UNIT_DIR}")
set(_out "${DEDUPD_I_BINARY_DIR}/prefixed")

configure_file("${DEDUPD_I_SOURCE_DIR}/config/dedupd.service.in" "${_out}/dedupd.service" @ONLY)
file(INSTALL DESTINATION "${_p}/${DEDUPD_I_UNIT_DIR}" TYPE FILE FILES "${_out}/dedupd.service")

# The example configs fall back to the handler directory of this prefix.
foreach(_cfg dedupd.example.yaml dedupd.minimal.yaml)
  file(READ "${DEDUPD_I_SOURCE_DIR}/config/${_cfg}" _text)
  string(REPLACE "\${DEDUPD_HANDLER_DIR:-/usr/local/lib/dedupd}" "\${DEDUPD_HANDLER_DIR:-${DEDUPD_HANDLER_FULL_DIR}}"
    _text "${_text}")
  file(WRITE "${_out}/${_cfg}" "${_text}")
  file(INSTALL DESTINATION "${_p}/${DEDUPD_I_DOCDIR}" TYPE FILE FILES "${_out}/${_cfg}")
endforeach()
