# Helpers that give every backend the same shape.
#
# dlock_backend_option(NAME DEFAULT "doc") declares DLOCK_WITH_<NAME>=AUTO|ON|OFF.
# dlock_backend_enabled(NAME FOUND OUT) decides from the option and whether the backend's
# dependencies were found: AUTO builds it when found and leaves it out (saying so) when not,
# ON fails the configure when not. FOUND is TRUE/FALSE or the NAME of a variable such as
# HIREDIS_FOUND (evaluated here, so an unset or false variable means "not found").
# dlock_add_backend(name SOURCES … [LIBS …]) creates dlock_<name> (alias dlock::<name>),
# a static library whose registrar puts the scheme into dlock::open's registry.

set_property(GLOBAL PROPERTY DLOCK_BACKENDS "")

function(dlock_backend_option NAME DEFAULT DOC)
  set(DLOCK_WITH_${NAME} ${DEFAULT} CACHE STRING "${DOC} (AUTO|ON|OFF)")
  set_property(CACHE DLOCK_WITH_${NAME} PROPERTY STRINGS AUTO ON OFF)
endfunction()

function(dlock_backend_enabled NAME FOUND OUT)
  set(mode ${DLOCK_WITH_${NAME}})
  string(TOLOWER "${NAME}" name)
  # `if(FOUND)` would test the parameter itself, a non-empty string and so always true: the
  # bug that made AUTO configure a backend whose library was missing.
  if(mode STREQUAL "OFF")
    message(STATUS "dlock: ${name} backend off (DLOCK_WITH_${NAME}=OFF)")
    set(${OUT} FALSE PARENT_SCOPE)
  elseif(${FOUND})
    set(${OUT} TRUE PARENT_SCOPE)
  elseif(mode STREQUAL "ON")
    message(FATAL_ERROR "DLOCK_WITH_${NAME}=ON but its dependencies were not found")
  else()
    message(STATUS "dlock: ${name} backend left out: its dependencies were not found "
                   "(DLOCK_WITH_${NAME}=AUTO; =ON makes this an error)")
    set(${OUT} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(dlock_add_backend name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(dlock_${name} STATIC ${ARG_SOURCES})
  add_library(dlock::${name} ALIAS dlock_${name})
  set_target_properties(dlock_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME dlock_${name})
  target_link_libraries(dlock_${name} PUBLIC dlock::core PRIVATE $<BUILD_INTERFACE:dlock_warnings> ${ARG_LIBS})
  target_include_directories(dlock_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
  install(TARGETS dlock_${name} EXPORT dlockTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY DLOCK_BACKENDS ${name})
endfunction()

# dlock::dlock links every backend whole, so each static registrar is kept by the linker.
function(dlock_add_umbrella)
  get_property(backends GLOBAL PROPERTY DLOCK_BACKENDS)
  add_library(dlock INTERFACE)
  add_library(dlock::dlock ALIAS dlock)
  target_link_libraries(dlock INTERFACE dlock::core)
  foreach(b IN LISTS backends)
    target_link_libraries(dlock INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,dlock::${b}>")
  endforeach()
  install(TARGETS dlock EXPORT dlockTargets)
  set(DLOCK_COMPILED_BACKENDS "${backends}" CACHE INTERNAL "compiled-in backends")
  message(STATUS "dlock: backends compiled in: ${backends}")
endfunction()
