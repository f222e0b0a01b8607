# The man pages dedupd(8), dedupctl(1) and dedupd.yaml(5), built with pandoc
# from docs/man/*.md (dedupd.yaml(5): its head, then the configuration
# reference as `dedupctl help-config --man` prints it from the table, then its
# tail) and installed under share/man (component man). Without pandoc there
# are none (scripts/deps installs it).
include(GNUInstallDirs)
find_program(PANDOC pandoc)
if(NOT PANDOC)
  message(STATUS "pandoc not found: no man pages")
  return()
endif()
set(DEDUPD_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(DEDUPD_MAN_PAGES)
foreach(page dedupd.8 dedupctl.1 dedupd.yaml.5)
  set(src ${CMAKE_SOURCE_DIR}/docs/man/${page}.md)
  set(deps ${src})
  set(body "true")
  set(tail /dev/null)
  if(page STREQUAL "dedupd.yaml.5")
    set(body "$<TARGET_FILE:dedupctl> help-config --man")
    set(tail ${CMAKE_SOURCE_DIR}/docs/man/${page}.tail.md)
    list(APPEND deps dedupctl ${tail})
  endif()
  add_custom_command(OUTPUT ${DEDUPD_MAN_DIR}/${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${DEDUPD_MAN_DIR}
    COMMAND sh -c "{ sed 's/@VERSION@/${PROJECT_VERSION}/' '${src}'; ${body}; cat '${tail}'; } | '${PANDOC}' -s -f markdown -t man -o '${DEDUPD_MAN_DIR}/${page}'"
    DEPENDS ${deps} VERBATIM)
  list(APPEND DEDUPD_MAN_PAGES ${DEDUPD_MAN_DIR}/${page})
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
  install(FILES ${DEDUPD_MAN_DIR}/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT man)
endforeach()
add_custom_target(man ALL DEPENDS ${DEDUPD_MAN_PAGES})
