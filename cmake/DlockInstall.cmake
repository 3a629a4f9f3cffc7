# Installs dlock for its users: headers and static libraries (installed by each target
# itself into the export set dlockTargets), then here
#   <libdir>/cmake/dlock/dlockTargets.cmake   the export set, namespace dlock::
#   <libdir>/cmake/dlock/dlockConfig.cmake    find_package(dlock): finds what the static
#                                             libraries link privately, for the backends
#                                             compiled in (DLOCK_COMPILED_BACKENDS)
#   <libdir>/cmake/dlock/dlockConfigVersion.cmake
#   <libdir>/pkgconfig/dlock.pc               pkg-config: whole-archives the backends
# Included last from the root CMakeLists.txt, so every target and its link libraries exist.
include(CMakePackageConfigHelpers)

set(DLOCK_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/dlock"
    CACHE STRING "Where dlockConfig.cmake is installed, relative to the prefix")
set(DLOCK_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where dlock.pc is installed, relative to the prefix")

install(EXPORT dlockTargets NAMESPACE dlock:: FILE dlockTargets.cmake
        DESTINATION "${DLOCK_INSTALL_CMAKEDIR}")

# Well-known imported targets a dlock library might link: "target|cmake package|pc module".
set(_dlock_known_deps
    "PostgreSQL::PostgreSQL|PostgreSQL|libpq"
    "OpenSSL::Crypto|OpenSSL|libcrypto"
    "fmt::fmt|fmt|fmt"
    "fmt::fmt-header-only|fmt|fmt"
    "spdlog::spdlog|spdlog|spdlog"
    "nlohmann_json::nlohmann_json|nlohmann_json|nlohmann_json")

# Walks the link libraries of `targets` (and of in-project static libraries they link) and
# sets in the caller's scope:
#   DLOCK_CONFIG_DEPS  CMake code for dlockConfig.cmake that finds each dependency
#   DLOCK_PC_REQUIRES  pkg-config modules needed at link time
#   DLOCK_PC_LIBS      other link flags (-lfoo for a library found by path or name)
#   DLOCK_PC_INTERNAL  in-project static libraries linked by the targets, by output name
function(_dlock_collect_deps)
  set(todo ${ARGN})
  set(seen "")
  set(config "")
  set(requires "")
  set(libs "")
  set(internal "")
  while(todo)
    list(POP_FRONT todo tgt)
    if(tgt IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${tgt})
    get_target_property(items ${tgt} LINK_LIBRARIES)
    get_target_property(iface ${tgt} INTERFACE_LINK_LIBRARIES)
    foreach(item IN LISTS items iface)
      # "::@…" marks items linked from another directory; not libraries.
      if(item MATCHES "-NOTFOUND$" OR item STREQUAL "" OR item MATCHES "^::@")
        continue()
      endif()
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
      if(item MATCHES "\\$<")
        continue()  # e.g. the umbrella's WHOLE_ARCHIVE wrappers: dlock targets, handled below
      endif()
      set(known "")
      foreach(entry IN LISTS _dlock_known_deps)
        string(REPLACE "|" ";" entry "${entry}")
        list(GET entry 0 name)
        if(name STREQUAL item)
          set(known "${entry}")
        endif()
      endforeach()
      # Imported targets are matched by name first: those made in a subdirectory (e.g. by
      # pkg_check_modules) are not visible here.
      if(item STREQUAL "Threads::Threads")
        # always found by dlockConfig.cmake; -pthread is in dlock.pc's Libs
      elseif(item MATCHES "^PkgConfig::(.+)$")
        set(prefix ${CMAKE_MATCH_1})
        if(DEFINED CACHE{${prefix}_MODULE_NAME})
          set(modules ${${prefix}_MODULE_NAME})
        else()  # several modules under one prefix: <prefix>_<module>_MODULE_NAME each
          get_cmake_property(vars CACHE_VARIABLES)
          list(FILTER vars INCLUDE REGEX "^${prefix}_.+_MODULE_NAME$")
          set(modules "")
          foreach(v IN LISTS vars)
            list(APPEND modules ${${v}})
          endforeach()
        endif()
        if(NOT modules)
          message(FATAL_ERROR "DlockInstall: cannot tell which pkg-config module ${item} is")
        endif()
        list(JOIN modules " " spaced)
        string(APPEND config "_dlock_find_pkg(${prefix} ${spaced})\n")
        list(APPEND requires ${modules})
      elseif(known)
        list(GET known 1 pkg)
        list(GET known 2 module)
        string(APPEND config "find_dependency(${pkg})\n")
        list(APPEND requires ${module})
      elseif(TARGET ${item})
        get_target_property(imported ${item} IMPORTED)
        if(imported)
          message(FATAL_ERROR "DlockInstall: dlock links ${item}; add how users find it to "
                              "_dlock_known_deps in cmake/DlockInstall.cmake")
        endif()
        get_target_property(real ${item} ALIASED_TARGET)
        if(real)
          set(item ${real})
        endif()
        list(APPEND todo ${item})
        get_target_property(type ${item} TYPE)
        if(type STREQUAL "STATIC_LIBRARY" AND NOT item IN_LIST _dlock_libs)
          get_target_property(out ${item} OUTPUT_NAME)
          if(NOT out)
            set(out ${item})
          endif()
          list(APPEND internal "-l${out}")
        endif()
      elseif(item MATCHES "::")
        message(FATAL_ERROR "DlockInstall: dlock links ${item}, not visible from the root "
                            "directory; add how users find it to _dlock_known_deps")
      elseif(IS_ABSOLUTE "${item}")
        # A library found by path (find_library): the export keeps the path; pkg-config
        # gets -L/-l so that it also works where the file lives elsewhere.
        get_filename_component(dir "${item}" DIRECTORY)
        get_filename_component(file "${item}" NAME)
        if(file MATCHES "^lib(.+)\\.(so|a)(\\..*)?$")
          set(libname "${CMAKE_MATCH_1}")  # the next MATCHES overwrites CMAKE_MATCH_1
          if(NOT dir MATCHES "^/usr/lib(/x86_64-linux-gnu|/aarch64-linux-gnu)?$|^/lib")
            list(APPEND libs "-L${dir}")
          endif()
          list(APPEND libs "-l${libname}")
        else()
          list(APPEND libs "${item}")
        endif()
      elseif(item MATCHES "^-")
        list(APPEND libs "${item}")
      else()
        list(APPEND libs "-l${item}")  # a plain library name such as m or zookeeper_mt
      endif()
    endforeach()
  endwhile()
  foreach(v requires libs internal)
    list(REMOVE_DUPLICATES ${v})
  endforeach()
  # Each dependency is found once, whichever dlock library needs it.
  string(REPLACE "\n" ";" config_lines "${config}")
  list(REMOVE_DUPLICATES config_lines)
  list(JOIN config_lines "\n" config)
  set(DLOCK_CONFIG_DEPS "${config}" PARENT_SCOPE)
  list(JOIN requires ", " requires)
  set(DLOCK_PC_REQUIRES "${requires}" PARENT_SCOPE)
  list(JOIN libs " " libs)
  set(DLOCK_PC_LIBS "${libs}" PARENT_SCOPE)
  list(JOIN internal " " internal)
  set(DLOCK_PC_INTERNAL "${internal}" PARENT_SCOPE)
endfunction()

list(JOIN DLOCK_COMPILED_BACKENDS " " DLOCK_PC_BACKEND_NAMES)
set(_dlock_libs dlock_core)
set(DLOCK_PC_BACKENDS "")
foreach(b IN LISTS DLOCK_COMPILED_BACKENDS)
  list(APPEND _dlock_libs dlock_${b})
  get_target_property(out dlock_${b} OUTPUT_NAME)
  string(APPEND DLOCK_PC_BACKENDS " -l${out}")
endforeach()
if(DLOCK_PC_BACKENDS)
  # Static registrars are unreferenced objects: without whole-archive the linker drops them
  # and dlock::open does not know the scheme.
  set(DLOCK_PC_BACKENDS "-Wl,--whole-archive${DLOCK_PC_BACKENDS} -Wl,--no-whole-archive")
endif()
# Other installed libraries on top of the core (they need no whole-archive).
set(DLOCK_PC_OTHER "")
foreach(t IN ITEMS dlock_adapters)
  if(TARGET ${t})
    list(APPEND _dlock_libs ${t})
    get_target_property(out ${t} OUTPUT_NAME)
    string(APPEND DLOCK_PC_OTHER " -l${out}")
  endif()
endforeach()
_dlock_collect_deps(${_dlock_libs})

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/dlockConfig.cmake.in"
  "${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake"
  INSTALL_DESTINATION "${DLOCK_INSTALL_CMAKEDIR}")
# 0.x: a minor release may break the API, so only the same major.minor is compatible.
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake"
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlockConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/dlockConfigVersion.cmake"
        DESTINATION "${DLOCK_INSTALL_CMAKEDIR}")

# dlock.pc finds the prefix from its own location (${pcfiledir}), so it stays right when
# the tree is installed with `cmake --install --prefix` or moved.
if(IS_ABSOLUTE "${DLOCK_INSTALL_PKGCONFIGDIR}")
  set(DLOCK_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _dlock_up "/prefix/${DLOCK_INSTALL_PKGCONFIGDIR}" "/prefix")
  string(REGEX REPLACE "/$" "" _dlock_up "${_dlock_up}")
  set(DLOCK_PC_PREFIX "\${pcfiledir}/${_dlock_up}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(DLOCK_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(DLOCK_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(DLOCK_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(DLOCK_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/dlock.pc.in" "${CMAKE_CURRENT_BINARY_DIR}/dlock.pc" @ONLY)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/dlock.pc" DESTINATION "${DLOCK_INSTALL_PKGCONFIGDIR}")
