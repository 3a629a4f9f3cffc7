# Generates a C++ source holding the bytes of each Lua script (cmake -P mode).
# Inputs: OUT (the .cpp to write), SCRIPTS (;-separated .lua paths), PRELUDE (a .lua file
# prepended to the scripts named in PRELUDED, a ;-separated list of stems).
# Each script becomes `extern const std::string_view dlock::redis::lua::<stem>`.
cmake_minimum_required(VERSION 3.25)
set(body "// Generated from backends/redis/lua/*.lua by embed_lua.cmake: do not edit.\n")
string(APPEND body "#include <string_view>\n\nnamespace dlock::redis::lua {\n")
file(READ ${PRELUDE} prelude_hex HEX)
foreach(script IN LISTS SCRIPTS)
  get_filename_component(stem ${script} NAME_WE)
  file(READ ${script} hex HEX)
  if(stem IN_LIST PRELUDED)
    set(hex "${prelude_hex}0a${hex}")
  endif()
  # Bytes >= 0x80 do not fit a char: the compiler rejects them (ASCII scripts only).
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "(..)" "0x\\1," bytes "${hex}")
  string(APPEND body "namespace {\nconst char ${stem}_bytes[] = {${bytes}};\n}  // namespace\n")
  string(APPEND body "extern const std::string_view ${stem}(${stem}_bytes, ${size});\n\n")
endforeach()
string(APPEND body "}  // namespace dlock::redis::lua\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
