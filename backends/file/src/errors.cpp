#include "errors.h"

#include <cstring>
#include <string>

namespace dlock::file {

Error sys_error(std::string_view op, std::string_view path, int err) {
  std::string msg = "file://: ";
  msg += op;
  msg += ' ';
  msg += path;
  msg += ": ";
  msg += std::strerror(err);  // glibc's strerror is thread-safe for known codes
  return Error(ErrorCode::unavailable, msg);
}

}  // namespace dlock::file
