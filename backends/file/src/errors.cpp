#include "errors.h"

#include <cerrno>
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
  switch (err) {
    case ELOOP:         // a symlink planted at the path (never followed)
    case EISDIR:        // a directory at a lock file's path
    case ENOTDIR:       // a file where a directory should be
    case ENAMETOOLONG:  // the directory's path leaves no room for the name
    case EROFS:         // a read-only file system
    case EACCES:        // no permission on the directory or the file
    case EPERM:
      return Error(ErrorCode::invalid_argument, msg);
    default:  // I/O, a full disk, out of descriptors or memory: may pass
      return Error(ErrorCode::unavailable, msg);
  }
}

}  // namespace dlock::file
