# Generates a C++ source holding the bytes of each Lua script (cmake -P mode).
# Inputs: OUT (the .cpp to write), SCRIPTS (;-separated .lua paths).
# Each script becomes `extern const std::string_view dlock::redis::lua::<stem>`.
set(body "// Generated from backends/redis/lua/*.lua by embed_lua.cmake: do not edit.\n")
string(APPEND body "#include <string_view>\n\nnamespace dlock::redis::lua {\n")
foreach(script IN LISTS SCRIPTS)
  get_filename_component(stem ${script} NAME_WE)
  file(READ ${script} hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x..,){16})" "\\1\n  " bytes "${bytes}")
  string(APPEND body "namespace {\nconst char ${stem}_bytes[] = {\n  ${bytes}};\n}  // namespace\n")
  string(APPEND body "extern const std::string_view ${stem}(${stem}_bytes, ${size});\n\n")
endforeach()
string(APPEND body "}  // namespace dlock::redis::lua\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
